package cdc;

import com.fasterxml.jackson.databind.JsonNode;
import java.math.BigInteger;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * What the JVM-side decoders return, as jobs/formats/__init__.py declares a decoder's outcome: one
 * row per message (status, reason, table_id, records), its records in the canonical change record's
 * order of fields (jobs.model.record; ``event_id`` left to the decode stage, which computes it from the
 * record's fields).
 */
public final class Outcomes {
  private Outcomes() {}

  /** The change record's fields, in the order {@link #record} holds them (checked against jobs.model.record). */
  public static final String RECORD_FIELDS = "format,table_id,op,phase,key,before,after,present_columns,position,"
      + "tx_id,tx_seq,tx_last,event_time,column_types,topic,partition,offset,kafka_ts,event_id";

  static final String DECODED = "decoded", QUARANTINED = "quarantined", IGNORED = "ignored";
  static final String ENVELOPE = "envelope", UNWRAPPED = "unwrapped";
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
    return RowFactory.create(status, reason, tableId, records, null);
  }

  /** An outcome with the message's shape, where its format has several (see jobs/formats/__init__.py). */
  static Row outcome(String status, String reason, String tableId, List<Row> records, String shape) {
    return RowFactory.create(status, reason, tableId, records, shape);
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

  /** --primary-keys of a decoder's configuration: tables by id or last part ({@code primary_keys}), then
   *  globs over the whole id in their order ({@code primary_key_globs}: [regex, columns] pairs whose regex
   *  jobs/model/table_rules.py made), so that a rule for one table wins over one for a family of tables. */
  static final class KeyRules implements java.io.Serializable {
    private final HashMap<String, ArrayList<String>> exact = new HashMap<>();
    private final ArrayList<Pattern> globs = new ArrayList<>();
    private final ArrayList<ArrayList<String>> globColumns = new ArrayList<>();

    boolean isEmpty() {
      return exact.isEmpty() && globs.isEmpty();
    }

    List<String> columnsOf(String tableId) {
      List<String> cols = exact.get(tableId);
      if (cols == null) cols = exact.get(tableId.substring(tableId.lastIndexOf('.') + 1));
      for (int i = 0; cols == null && i < globs.size(); i++) {
        if (globs.get(i).matcher(tableId).matches()) cols = globColumns.get(i);
      }
      return cols;
    }
  }

  private static ArrayList<String> texts(JsonNode array) {
    ArrayList<String> out = new ArrayList<>();
    array.forEach(v -> out.add(v.asText()));
    return out;
  }

  static KeyRules keyRules(JsonNode primaryKeys, JsonNode globs) {
    KeyRules rules = new KeyRules();
    primaryKeys.properties().forEach(e -> rules.exact.put(e.getKey(), texts(e.getValue())));
    if (globs != null) {
      globs.forEach(pair -> {
        rules.globs.add(Pattern.compile(pair.get(0).asText()));
        rules.globColumns.add(texts(pair.get(1)));
      });
    }
    return rules;
  }

  /** The key --primary-keys gives the table from ``image`` (see KeyRules); else null. */
  static Map<String, String> configuredKey(KeyRules primaryKeys, String tableId, Map<String, String> image) {
    if (primaryKeys.isEmpty() || tableId == null) return null;
    List<String> cols = primaryKeys.columnsOf(tableId);
    if (cols == null || image == null) return null;
    Map<String, String> key = new LinkedHashMap<>();
    for (String col : cols) key.put(col, image.get(col));
    return key;
  }

  private static final BigInteger TWO_TO_64 = BigInteger.ONE.shiftLeft(64);

  /** A non-negative integer as fixed-width digits (a negative one is an unsigned 64-bit value past 2^63). */
  static String padUnsigned(String v, int width) {
    if (v == null) return null;
    String digits;
    if (isPlainDigits(v)) {
      int start = 0;
      while (start < v.length() - 1 && v.charAt(start) == '0') start++;
      digits = v.substring(start);
    } else {
      BigInteger n = DebeziumTypes.tryWholeDecimal(v);
      if (n == null) return null;
      digits = (n.signum() < 0 ? n.add(TWO_TO_64) : n).toString();
    }
    if (digits.length() >= width) return digits.substring(0, width);  // lpad cuts, as Spark's does
    StringBuilder out = new StringBuilder(width);
    for (int i = digits.length(); i < width; i++) out.append('0');
    return out.append(digits).toString();
  }

  private static boolean isPlainDigits(String v) {
    if (v.isEmpty() || v.length() > 38) return false;
    for (int i = 0; i < v.length(); i++) {
      char c = v.charAt(i);
      if (c < '0' || c > '9') return false;
    }
    return true;
  }
}
