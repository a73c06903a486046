package cdc;

import java.io.EOFException;
import java.io.IOException;
import java.nio.file.Path;
import org.apache.avro.io.DecoderFactory;

/** Avro's decoder refuses a length the message's bytes cannot hold, before allocating anything for it. */
final class BoundedDecoderTest {
  private BoundedDecoderTest() {}

  private static BoundedDecoder over(byte[] bytes) {
    return new BoundedDecoder(DecoderFactory.get().binaryDecoder(bytes, null));
  }

  static void testAStringWithinTheMessageIsRead(Path repository) throws IOException {
    // zig-zag length 3, then "abc"
    Check.equal("abc", over(new byte[] {6, 'a', 'b', 'c'}).readString(), "the string");
  }

  static void testALengthPastTheMessagesEndIsRefused(Path repository) throws IOException {
    // zig-zag varint of 2^30: a 1 GB string claimed by a message of five bytes
    byte[] claim = {(byte) 0x80, (byte) 0x80, (byte) 0x80, (byte) 0x80, 0x08};
    try {
      over(claim).readString();
      throw new AssertionError("a 1 GB string was read from five bytes");
    } catch (EOFException expected) {
      Check.contains("past the message's end", expected.getMessage(), "the refusal");
    }
  }
}
