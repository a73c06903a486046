package cdc;

import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;

/**
 * Iceberg's bucket transform (the table spec's Appendix B: 32-bit Murmur3 x86, seed 0; bucket =
 * (hash & Integer.MAX_VALUE) % N) as Spark SQL functions, one per input representation, so that a
 * state table can be partitioned by {@code bucket[N](key)} and every engine prunes a lookup by key:
 *
 * <ul>
 *   <li>iceberg_bucket_long(long, n): int, long, date (days), time and timestamp (microseconds), hashed
 *       as an 8-byte little-endian long (Spark's Murmur3_x86_32.hashLong with seed 0 is exactly that);
 *   <li>iceberg_bucket_string(string, n): its UTF-8 bytes;
 *   <li>iceberg_bucket_binary(binary, n): the bytes (binary, fixed);
 *   <li>iceberg_bucket_decimal(decimal, n): the unscaled value's minimal big-endian two's-complement bytes.
 * </ul>
 *
 * Bytes are hashed by hashUnsafeBytes2, the standard algorithm: Spark's hash() uses hashUnsafeBytes,
 * which mixes the one to three tail bytes one by one, and seed 42, and matches no Iceberg bucket.
 */
public final class IcebergBucket {
  private IcebergBucket() {}

  static int bucket(int hash, int n) {
    return (hash & Integer.MAX_VALUE) % n;
  }

  static int hashLong(long value) {
    return Murmur3_x86_32.hashLong(value, 0);
  }

  static int hashBytes(byte[] bytes) {
    return Murmur3_x86_32.hashUnsafeBytes2(bytes, Platform.BYTE_ARRAY_OFFSET, bytes.length, 0);
  }

  static int hashString(String value) {
    return hashBytes(value.getBytes(StandardCharsets.UTF_8));
  }

  static int hashDecimal(BigDecimal value) {
    return hashBytes(value.unscaledValue().toByteArray());
  }

  /** Registers the four functions in {@code spark}'s session. */
  public static void register(SparkSession spark) {
    spark.udf().register("iceberg_bucket_long",
        (UDF2<Long, Integer, Integer>) (v, n) -> v == null ? null : bucket(hashLong(v), n), DataTypes.IntegerType);
    spark.udf().register("iceberg_bucket_string",
        (UDF2<String, Integer, Integer>) (v, n) -> v == null ? null : bucket(hashString(v), n), DataTypes.IntegerType);
    spark.udf().register("iceberg_bucket_binary",
        (UDF2<byte[], Integer, Integer>) (v, n) -> v == null ? null : bucket(hashBytes(v), n), DataTypes.IntegerType);
    spark.udf().register("iceberg_bucket_decimal",
        (UDF2<BigDecimal, Integer, Integer>) (v, n) -> v == null ? null : bucket(hashDecimal(v), n),
        DataTypes.IntegerType);
  }
}
