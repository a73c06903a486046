package cdc;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * What the JVM-side decoders return, as jobs/decoders/__init__.py declares a decoder's outcome: one
 * row per message (status, reason, table_id, records), its records in the canonical change record's
 * order of fields (jobs.canonical; ``event_id`` left to the decode stage, which computes it from the
 * record's fields).
 */
final class Outcomes {
  private Outcomes() {}

  static final String DECODED = "decoded", QUARANTINED = "quarantined", IGNORED = "ignored";
  static final String SNAPSHOT = "SNAPSHOT", INSERT = "INSERT", UPDATE = "UPDATE", DELETE = "DELETE",
      TRUNCATE = "TRUNCATE", DDL = "DDL", MESSAGE = "MESSAGE", TX_BEGIN = "TX_BEGIN", TX_END = "TX_END",
      LOAD_END = "LOAD_END", FULL_LOAD = "FULL_LOAD", CDC = "CDC";

  /** Where a message was landed from, copied onto each of its records. */
  static final class Lineage {
    final String topic;
    final Integer partition;
    final Long offset;
    final Instant timestamp;

    Lineage(String topic, Integer partition, Long offset, Long micros) {
      this.topic = topic;
      this.partition = partition;
      this.offset = offset;
      this.timestamp = micros == null ? null : instant(micros);
    }
  }

  /** One change record (CHANGE_RECORD_SCHEMA's fields in order; event_id null). */
  static Row record(String format, String tableId, String op, String phase, Map<String, String> key,
                    Map<String, String> before, Map<String, String> after, List<String> present, String position,
                    String txId, Long txSeq, Boolean txLast, Instant eventTime, Map<String, String> types,
                    Lineage lineage) {
    return RowFactory.create(format, tableId, op, phase, key, before, after, present, position, txId, txSeq, txLast,
        eventTime, types, lineage.topic, lineage.partition, lineage.offset, lineage.timestamp, null);
  }

  static Row outcome(String status, String reason, String tableId, List<Row> records) {
    return RowFactory.create(status, reason, tableId, records);
  }

  static Instant instant(long micros) {
    return Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000);
  }

  /** timestamp_millis(millis); null where it is null or past what a timestamp holds. */
  static Instant millis(Long millis) {
    if (millis == null) return null;
    try {
      return instant(Math.multiplyExact(millis, 1000L));
    } catch (ArithmeticException e) {
      return null;
    }
  }

  /** --primary-keys from a decoder's configuration: table (full id or last part) -> key columns. */
  static HashMap<String, ArrayList<String>> primaryKeys(JsonNode config) {
    HashMap<String, ArrayList<String>> out = new HashMap<>();
    config.properties().forEach(e -> {
      ArrayList<String> cols = new ArrayList<>();
      e.getValue().forEach(col -> cols.add(col.asText()));
      out.put(e.getKey(), cols);
    });
    return out;
  }

  /** The key --primary-keys gives the table (by its id, else its last part) from ``image``; else null. */
  static Map<String, String> configuredKey(Map<String, ArrayList<String>> primaryKeys, String tableId,
                                           Map<String, String> image) {
    if (primaryKeys.isEmpty() || tableId == null) return null;
    List<String> cols = primaryKeys.get(tableId);
    if (cols == null) cols = primaryKeys.get(tableId.substring(tableId.lastIndexOf('.') + 1));
    if (cols == null || image == null) return null;
    Map<String, String> key = new LinkedHashMap<>();
    for (String col : cols) key.put(col, image.get(col));
    return key;
  }
}
