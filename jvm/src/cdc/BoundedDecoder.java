package cdc;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.Decoder;
import org.apache.avro.util.Utf8;

/**
 * Avro's binary decoder over one message, refusing a length or a count that the bytes left cannot
 * hold before anything is allocated for it. Avro sizes a string, bytes or array by its length prefix
 * first: a malformed message claiming a 2 GB string would have the decoder allocate 2 GB, where it is
 * quarantined as not a record. Every item of the DTS schema's arrays and maps takes at least a byte.
 */
final class BoundedDecoder extends Decoder {
  private final BinaryDecoder in;

  BoundedDecoder(BinaryDecoder in) {
    this.in = in;
  }

  int remaining() throws IOException {
    return in.inputStream().available();
  }

  private int bounded(long length) throws IOException {
    if (length < 0 || length > remaining()) throw new EOFException("length " + length + " past the message's end");
    return (int) length;
  }

  @Override
  public Utf8 readString(Utf8 old) throws IOException {
    int length = bounded(in.readLong());
    Utf8 out = old != null ? old : new Utf8();
    out.setByteLength(length);
    if (length > 0) in.readFixed(out.getBytes(), 0, length);
    return out;
  }

  @Override
  public String readString() throws IOException {
    return readString(null).toString();
  }

  @Override
  public ByteBuffer readBytes(ByteBuffer old) throws IOException {
    int length = bounded(in.readLong());
    byte[] bytes = new byte[length];
    in.readFixed(bytes, 0, length);
    return ByteBuffer.wrap(bytes);
  }

  @Override
  public long readArrayStart() throws IOException {
    return bounded(in.readArrayStart());
  }

  @Override
  public long arrayNext() throws IOException {
    return bounded(in.arrayNext());
  }

  @Override
  public long readMapStart() throws IOException {
    return bounded(in.readMapStart());
  }

  @Override
  public long mapNext() throws IOException {
    return bounded(in.mapNext());
  }

  // ---- the rest as Avro reads it
  @Override
  public void readNull() throws IOException {
    in.readNull();
  }

  @Override
  public boolean readBoolean() throws IOException {
    return in.readBoolean();
  }

  @Override
  public int readInt() throws IOException {
    return in.readInt();
  }

  @Override
  public long readLong() throws IOException {
    return in.readLong();
  }

  @Override
  public float readFloat() throws IOException {
    return in.readFloat();
  }

  @Override
  public double readDouble() throws IOException {
    return in.readDouble();
  }

  @Override
  public void skipString() throws IOException {
    in.skipString();
  }

  @Override
  public void skipBytes() throws IOException {
    in.skipBytes();
  }

  @Override
  public void readFixed(byte[] bytes, int start, int length) throws IOException {
    in.readFixed(bytes, start, length);
  }

  @Override
  public void skipFixed(int length) throws IOException {
    in.skipFixed(length);
  }

  @Override
  public int readEnum() throws IOException {
    return in.readEnum();
  }

  @Override
  public long skipArray() throws IOException {
    return in.skipArray();
  }

  @Override
  public long skipMap() throws IOException {
    return in.skipMap();
  }

  @Override
  public int readIndex() throws IOException {
    return in.readIndex();
  }
}
