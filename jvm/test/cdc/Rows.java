package cdc;

import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;

/** An outcome's fields as a decoder returns them to Spark: Java lists and maps (Spark converts them). */
final class Rows {
  private Rows() {}

  @SuppressWarnings("unchecked")
  static List<Row> records(Row outcome) {
    return (List<Row>) outcome.get(3);
  }

  @SuppressWarnings("unchecked")
  static Map<String, String> map(Row record, int field) {
    return (Map<String, String>) record.get(field);
  }

  /** The one record of a decoded message. */
  static Row onlyRecord(Row outcome) {
    Check.equal("decoded", outcome.getString(0), "status (reason: " + outcome.getString(1) + ")");
    List<Row> records = records(outcome);
    Check.equal(1, records.size(), "records");
    return records.get(0);
  }
}
