package cdc;

import java.io.Serializable;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.expressions.Aggregator;
import org.apache.spark.sql.functions;
import scala.Tuple2;

/**
 * A grouped count as one aggregate function, so that it can be an observed metric of a pass that does
 * other work (Spark's {@code Dataset.observe} takes aggregates, not a GROUP BY):
 * {@code cdc_group_counts(group, value)} is, per distinct non-null {@code group}, the rows and the sum
 * of {@code value} (null counts as 0), as JSON text {@code [[group, rows, sum], ...]} in group order.
 * The group is embedded as it is: the caller passes JSON text (jobs.spark.observed builds it with
 * {@code to_json}), so the result parses as JSON. Meant for a handful of groups (tables, topics,
 * outcomes): its buffer holds one entry per group.
 */
public final class GroupCounts extends Aggregator<Tuple2<String, Long>, GroupCounts.Buffer, String> {
  public static final String NAME = "cdc_group_counts";

  /**
   * Per group, its rows and its values' sum. A bean, so that Spark encodes it with its own expressions
   * (a Java-serialized buffer fails where Spark evaluates expressions interpreted).
   */
  public static final class Buffer implements Serializable {
    private Map<String, Long> rows = new HashMap<>();
    private Map<String, Long> totals = new HashMap<>();

    public Map<String, Long> getRows() {
      return rows;
    }

    public void setRows(Map<String, Long> rows) {
      this.rows = new HashMap<>(rows);
    }

    public Map<String, Long> getTotals() {
      return totals;
    }

    public void setTotals(Map<String, Long> totals) {
      this.totals = new HashMap<>(totals);
    }

    void add(String group, long rowCount, long total) {
      rows.merge(group, rowCount, Long::sum);
      totals.merge(group, total, Long::sum);
    }
  }

  @Override
  public Buffer zero() {
    return new Buffer();
  }

  @Override
  public Buffer reduce(Buffer buffer, Tuple2<String, Long> row) {
    if (row != null && row._1() != null) buffer.add(row._1(), 1, row._2() == null ? 0 : row._2());
    return buffer;
  }

  @Override
  public Buffer merge(Buffer into, Buffer other) {
    for (Map.Entry<String, Long> e : other.rows.entrySet()) {
      into.add(e.getKey(), e.getValue(), other.totals.getOrDefault(e.getKey(), 0L));
    }
    return into;
  }

  @Override
  public String finish(Buffer buffer) {
    StringBuilder out = new StringBuilder("[");
    for (Map.Entry<String, Long> e : new TreeMap<>(buffer.rows).entrySet()) {
      if (out.length() > 1) out.append(',');
      out.append('[').append(e.getKey()).append(',').append(e.getValue()).append(',')
          .append(buffer.totals.getOrDefault(e.getKey(), 0L)).append(']');
    }
    return out.append(']').toString();
  }

  @Override
  public Encoder<Buffer> bufferEncoder() {
    return Encoders.bean(Buffer.class);
  }

  @Override
  public Encoder<String> outputEncoder() {
    return Encoders.STRING();
  }

  /** Registers cdc_group_counts(group string, value bigint) in {@code spark}'s session. */
  public static void register(SparkSession spark) {
    spark.udf().register(NAME, functions.udaf(new GroupCounts(), Encoders.tuple(Encoders.STRING(), Encoders.LONG())));
  }
}
