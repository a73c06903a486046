package cdc;

import java.math.BigDecimal;
import java.nio.file.Path;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneOffset;

/** The hashes of the Iceberg table spec's Appendix B ("32-bit Hash Requirements"), each of its test vectors. */
final class IcebergBucketTest {
  private IcebergBucketTest() {}

  static void testIntAndLongHashAlikeAsTheSpecSays(Path repository) {
    Check.equal(2017239379, IcebergBucket.hashLong(34), "hash(34) as int");
    Check.equal(2017239379, IcebergBucket.hashLong(34L), "hash(34L)");
  }

  static void testADecimalHashesItsUnscaledBytes(Path repository) {
    Check.equal(-500754589, IcebergBucket.hashDecimal(new BigDecimal("14.20")), "hash(14.20)");
  }

  static void testDatesTimesAndTimestampsHashTheirDaysOrMicroseconds(Path repository) {
    long days = LocalDate.of(2017, 11, 16).toEpochDay();
    long timeMicros = LocalTime.of(22, 31, 8).toNanoOfDay() / 1000;
    long tsMicros = LocalDateTime.of(2017, 11, 16, 22, 31, 8).toEpochSecond(ZoneOffset.UTC) * 1_000_000L;
    Check.equal(-653330422, IcebergBucket.hashLong(days), "hash(2017-11-16)");
    Check.equal(-662762989, IcebergBucket.hashLong(timeMicros), "hash(22:31:08)");
    Check.equal(-2047944441, IcebergBucket.hashLong(tsMicros), "hash(2017-11-16T22:31:08)");
  }

  static void testStringsAndBytesHashTheStandardMurmur3(Path repository) {
    Check.equal(1210000089, IcebergBucket.hashString("iceberg"), "hash(\"iceberg\")");
    Check.equal(-188683207, IcebergBucket.hashBytes(new byte[] {0, 1, 2, 3}), "hash(00 01 02 03)");
  }

  static void testABucketIsTheHashsNonNegativePartModuloN(Path repository) {
    Check.equal((2017239379 & Integer.MAX_VALUE) % 16, IcebergBucket.bucket(IcebergBucket.hashLong(34L), 16), "bucket[16](34)");
    Check.equal((-188683207 & Integer.MAX_VALUE) % 1021, IcebergBucket.bucket(-188683207, 1021), "a negative hash");
  }
}
