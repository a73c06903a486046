package cdc;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF7;
import org.apache.spark.sql.types.DataType;

import static cdc.Outcomes.*;

/**
 * The Debezium decoder on the JVM side: one Kafka message → its decode outcome (status, reason,
 * table_id, change records), in one streaming pass of Jackson over the value: the format's one decoder
 * (it replaced a Spark SQL one of some fifty column expressions per message, each copying the row;
 * bench/README.md, "JVM-side decoding"). tests/unit/formats/test_debezium.py holds it to the samples'
 * expected rows, the replays to the SQLite model.
 *
 * <p>Records leave with a null event_id: the decode stage computes every such id from the record's
 * own fields in generated code (jobs/decode/stage.py). Arguments: the message's key and value, topic,
 * partition, offset, Kafka timestamp (microseconds) and headers.
 */
public final class DebeziumUdf implements UDF7<byte[], byte[], String, Integer, Long, Long, scala.collection.Seq<Row>, Row> {
  private static final long serialVersionUID = 1L;

  private static final Map<String, String> OPS = new HashMap<>();
  private static final Set<String> SNAPSHOT_MARKERS =
      new HashSet<>(Arrays.asList("true", "first", "last", "first_in_data_collection", "last_in_data_collection"));

  static {
    String[][] ops = {{"r", SNAPSHOT}, {"c", INSERT}, {"u", UPDATE}, {"d", DELETE}, {"t", TRUNCATE}, {"m", MESSAGE}};
    for (String[] op : ops) OPS.put(op[0], op[1]);
  }

  // the source block's fields the decoder reads, by index
  private static final String[] SOURCE_FIELDS = {"connector", "db", "schema", "table", "snapshot", "ts_ms", "txId",
    "lsn", "sequence", "commit_lsn", "change_lsn", "event_serial_no", "file", "pos", "row", "scn", "commit_scn"};
  private static final Map<String, Integer> SOURCE_INDEX = new HashMap<>();
  private static final int CONNECTOR = 0, DB = 1, SCHEMA = 2, TABLE = 3, SNAPSHOT_FIELD = 4, TS_MS = 5, TX_ID = 6,
      LSN = 7, SEQUENCE = 8, COMMIT_LSN = 9, CHANGE_LSN = 10, EVENT_SERIAL_NO = 11, FILE = 12, POS = 13, ROW = 14,
      SCN = 15, COMMIT_SCN = 16;

  static {
    for (int i = 0; i < SOURCE_FIELDS.length; i++) SOURCE_INDEX.put(SOURCE_FIELDS[i], i);
  }

  private static final byte[] PAYLOAD_NEEDLE = "\"payload\"".getBytes(StandardCharsets.UTF_8);
  private static final byte[] TABLE_CHANGES_NEEDLE = "\"tableChanges\"".getBytes(StandardCharsets.UTF_8);
  private static final String OLD_KEY_HEADER = "__debezium.oldkey";
  private static final Pattern TRAILING_DIGITS = Pattern.compile("(\\d+)$");

  private final String format;
  private final Outcomes.KeyRules primaryKeys;
  private final HashSet<String> unavailable = new HashSet<>();
  private final String noTable;
  private final TableIds tableIds;
  private final String keySetting;  // how a user gives a table's key, named where a reason asks for one
  private transient ConcurrentHashMap<String, DebeziumTypes.RowSpecs> specs;

  /** {@code config}: JSON from jobs/formats/debezium/decoder.py (format, primary_keys, key_setting, unavailable,
   * table-id rules). */
  public DebeziumUdf(String config) throws IOException {
    JsonNode c = new ObjectMapper().readTree(config);
    format = c.get("format").asText();
    primaryKeys = Outcomes.keyRules(c.get("primary_keys"), c.get("primary_key_globs"));
    c.get("unavailable").forEach(v -> unavailable.add(v.asText()));
    noTable = c.get("no_table").asText();
    tableIds = TableIds.fromConfig(c);
    keySetting = c.get("key_setting").asText();
  }

  /** Registers the decoder under {@code name}, returning {@code returnType} (a DataType's JSON). */
  public static void register(SparkSession spark, String name, String config, String returnType) throws IOException {
    spark.udf().register(name, new DebeziumUdf(config), DataType.fromJson(returnType));
  }

  // ---- the parsed value ---------------------------------------------------------------------
  /** One level of the envelope: the value itself, or the payload beside a schema section. */
  private static final class Envelope {
    String op, status, id, ddl, tableChanges;
    Map<String, String> before, after;
    String[] source;
    Long tsMs, eventCount;
    boolean hasTransaction, hasMessage;
    String txId, messagePrefix, messageContent;
    Long txTotalOrder;
  }

  private static final class Parsed {
    final Envelope root = new Envelope();
    Envelope payload;  // null unless the value's payload is an object
    String schema;  // the schema section's text, where there is one
    boolean corrupt;
  }

  private static final Parsed EMPTY = new Parsed();
  private static final Parsed BROKEN = new Parsed();

  static {
    BROKEN.corrupt = true;
  }

  /** A field's value of the wrong JSON type: from_json keeps what it read so far and marks the record. */
  private static final class WrongType extends Exception {
    private static final long serialVersionUID = 1L;
    static final WrongType INSTANCE = new WrongType();

    private WrongType() {
      super(null, null, false, false);
    }
  }

  private static Parsed parse(byte[] value) {
    try (JsonParser p = Json.FACTORY.createParser(value)) {
      return readValue(p, value, null);
    } catch (IOException | RuntimeException e) {
      String text = new String(value, StandardCharsets.UTF_8);  // malformed UTF-8 replaced, as Spark reads it
      try (JsonParser p = Json.FACTORY.createParser(text)) {
        return readValue(p, null, text);
      } catch (IOException | RuntimeException e2) {
        return BROKEN;
      }
    }
  }

  private static Parsed readValue(JsonParser p, byte[] bytes, String text) throws IOException {
    JsonToken first = p.nextToken();
    if (first == null) return EMPTY;
    if (first != JsonToken.START_OBJECT) return BROKEN;
    Parsed out = new Parsed();
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken t = p.nextToken();
      try {
        switch (name) {
          case "schema":
            out.schema = t == JsonToken.START_OBJECT ? slice(p, bytes, text) : Json.text(p, t);
            break;
          case "payload":
            out.payload = t == JsonToken.VALUE_NULL ? null : readEnvelope(p, t, out);
            break;
          default:
            readField(p, name, t, out.root, out);
        }
      } catch (WrongType e) {
        out.corrupt = true;
        p.skipChildren();
      }
    }
    return out;
  }

  /** The object at the parser's START_OBJECT, as the text the value holds (its specs are looked up by it). */
  private static String slice(JsonParser p, byte[] bytes, String text) throws IOException {
    if (bytes != null) {
      int start = (int) p.currentTokenLocation().getByteOffset();
      p.skipChildren();
      int end = (int) p.currentTokenLocation().getByteOffset() + 1;
      return new String(bytes, start, end - start, StandardCharsets.UTF_8);
    }
    int start = (int) p.currentTokenLocation().getCharOffset();
    p.skipChildren();
    return text.substring(start, (int) p.currentTokenLocation().getCharOffset() + 1);
  }

  private static Envelope readEnvelope(JsonParser p, JsonToken t, Parsed out) throws IOException, WrongType {
    if (t != JsonToken.START_OBJECT) throw WrongType.INSTANCE;
    Envelope e = new Envelope();
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken v = p.nextToken();
      try {
        readField(p, name, v, e, out);
      } catch (WrongType w) {
        out.corrupt = true;
        p.skipChildren();
      }
    }
    return e;
  }

  private static void readField(JsonParser p, String name, JsonToken t, Envelope e, Parsed out)
      throws IOException, WrongType {
    switch (name) {
      case "before":
        e.before = image(p, t);
        break;
      case "after":
        e.after = image(p, t);
        break;
      case "source":
        e.source = source(p, t);
        break;
      case "op":
        e.op = Json.text(p, t);
        break;
      case "ts_ms":
        e.tsMs = bigint(p, t);
        break;
      case "transaction":
        transaction(p, t, e, out);
        break;
      case "message":
        message(p, t, e);
        break;
      case "status":
        e.status = Json.text(p, t);
        break;
      case "id":
        e.id = Json.text(p, t);
        break;
      case "event_count":
        e.eventCount = bigint(p, t);
        break;
      case "ddl":  // a schema change event's fields
        e.ddl = Json.text(p, t);
        break;
      case "tableChanges":
        e.tableChanges = Json.text(p, t);
        break;
      default:
        p.skipChildren();
    }
  }

  private static Map<String, String> image(JsonParser p, JsonToken t) throws IOException, WrongType {
    if (t == JsonToken.VALUE_NULL) return null;
    if (t != JsonToken.START_OBJECT) throw WrongType.INSTANCE;
    return Json.map(p);
  }

  private static String[] source(JsonParser p, JsonToken t) throws IOException, WrongType {
    if (t == JsonToken.VALUE_NULL) return null;
    if (t != JsonToken.START_OBJECT) throw WrongType.INSTANCE;
    String[] fields = new String[SOURCE_FIELDS.length];
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      Integer index = SOURCE_INDEX.get(p.currentName());
      JsonToken v = p.nextToken();
      if (index == null) p.skipChildren();
      else fields[index] = Json.text(p, v);
    }
    return fields;
  }

  private static Long bigint(JsonParser p, JsonToken t) throws IOException, WrongType {
    if (t == JsonToken.VALUE_NULL) return null;
    if (t != JsonToken.VALUE_NUMBER_INT || p.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
      throw WrongType.INSTANCE;
    }
    return p.getLongValue();
  }

  private static void transaction(JsonParser p, JsonToken t, Envelope e, Parsed out) throws IOException, WrongType {
    if (t == JsonToken.VALUE_NULL) {
      e.hasTransaction = false;
      e.txId = null;
      e.txTotalOrder = null;
      return;
    }
    if (t != JsonToken.START_OBJECT) throw WrongType.INSTANCE;
    String id = null;
    Long totalOrder = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken v = p.nextToken();
      try {
        switch (name) {
          case "id":
            id = Json.text(p, v);
            break;
          case "total_order":
            totalOrder = bigint(p, v);
            break;
          case "data_collection_order":
            bigint(p, v);
            break;
          default:
            p.skipChildren();
        }
      } catch (WrongType w) {  // the struct keeps what it read (partial results)
        out.corrupt = true;
        p.skipChildren();
      }
    }
    e.hasTransaction = true;
    e.txId = id;
    e.txTotalOrder = totalOrder;
  }

  private static void message(JsonParser p, JsonToken t, Envelope e) throws IOException, WrongType {
    if (t == JsonToken.VALUE_NULL) {
      e.hasMessage = false;
      e.messagePrefix = e.messageContent = null;
      return;
    }
    if (t != JsonToken.START_OBJECT) throw WrongType.INSTANCE;
    String prefix = null, content = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      JsonToken v = p.nextToken();
      if ("prefix".equals(name)) prefix = Json.text(p, v);
      else if ("content".equals(name)) content = Json.text(p, v);
      else p.skipChildren();
    }
    e.hasMessage = true;
    e.messagePrefix = prefix;
    e.messageContent = content;
  }

  // ---- the decoder --------------------------------------------------------------------------
  @Override
  public Row call(byte[] key, byte[] value, String topic, Integer partition, Long offset, Long kafkaMicros,
                  scala.collection.Seq<Row> headers) {
    Lineage lineage = new Lineage(topic, partition, offset, kafkaMicros);
    if (value == null || value.length == 0) return outcome(IGNORED, "tombstone", null, null);
    Parsed j = parse(value);
    Envelope env = j.payload != null ? j.payload : j.root;
    String[] src = env.source;

    // 1. ExtractNewRecordState's flat rows, schema change events, the table and the position
    boolean flatCandidate = (env.op == null || !OPS.containsKey(env.op)) && src == null && env.before == null
        && env.after == null && env.status == null;
    LinkedHashMap<String, String> flat = flatCandidate ? Json.parseMap(value) : null;
    boolean isFlat = flat != null;
    boolean isChange = env.op == null && src != null && !j.corrupt && Json.contains(value, TABLE_CHANGES_NEEDLE);
    Envelope change = j.payload != null ? j.payload : j.root;
    if (flat != null && flat.size() == 2 && flat.containsKey("schema") && flat.containsKey("payload")) {
      flat = Json.parseMap(flat.get("payload"));
    }
    boolean flatDeleted = flat != null && flat.get("__deleted") != null
        && "true".equals(flat.get("__deleted").toLowerCase(Locale.ROOT));
    Map<String, String> flatRow = flat == null ? null : withoutMetaColumns(flat);
    String opCode = isFlat ? (flatDeleted ? "d" : coalesce(flat == null ? null : flat.get("__op"), "c")) : env.op;
    Map<String, String> before = isFlat ? (flatDeleted ? flatRow : null) : env.before;
    Map<String, String> after = isFlat ? (flatDeleted ? null : flatRow) : env.after;
    boolean heartbeat = isFlat && ((topic != null && topic.startsWith("__debezium-heartbeat"))
        || (flat != null && flat.size() == 1 && flat.containsKey("ts_ms")));
    String tableId;
    if (isFlat) {
      String[] parts = topic == null ? null : topic.split("\\.", -1);
      String schema = flat == null ? null : flat.get("__schema");
      if (schema == null && parts != null && parts.length >= 3) schema = parts[parts.length - 2];
      String table = flat == null ? null : flat.get("__table");
      if (table == null && parts != null) table = parts[parts.length - 1];
      tableId = tableIds.of(flat == null ? null : flat.get("__db"), schema, table);
    } else if (src != null && ((src[TABLE] != null && !src[TABLE].isEmpty()) || "m".equals(env.op) || isChange)) {
      tableId = tableIds.of(src[DB], src[SCHEMA], src[TABLE]);
    } else {
      tableId = null;
    }
    String position = isFlat ? null : sourcePosition(src);
    Map<String, String> kafkaKey = keyFromMessageKey(key);
    Map<String, String> oldKey = "c".equals(env.op) && headers != null ? oldKeyHeader(headers) : null;

    // 2. typed values (Debezium's logical types) and the canonical op / phase
    DebeziumTypes.RowSpecs rowSpecs = j.schema != null && Json.contains(value, PAYLOAD_NEEDLE) ? specs(j.schema) : null;
    Map<String, String> types = rowSpecs == null ? null : rowSpecs.types;
    if (rowSpecs != null) {
      oldKey = rowSpecs.convert(oldKey);
      before = rowSpecs.convert(before);
      after = rowSpecs.convert(after);
    }
    String snapshot = src == null || src[SNAPSHOT_FIELD] == null ? null : src[SNAPSHOT_FIELD].toLowerCase(Locale.ROOT);
    String op;
    if (isChange) op = DDL;
    else if (snapshot != null && SNAPSHOT_MARKERS.contains(snapshot) && ("r".equals(opCode) || "c".equals(opCode))) {
      op = SNAPSHOT;
    } else op = opCode == null ? null : OPS.get(opCode);
    // unavailable (unchanged, not sent) TOAST values leave the image; present_columns says so
    Map<String, String> clean = after == null ? null : withoutUnavailable(after);
    List<String> present = after != null && clean.size() != after.size() ? new ArrayList<>(clean.keySet()) : null;
    // an incremental snapshot is not a complete image: its rows are upserts ordered like CDC
    String phase = SNAPSHOT.equals(op) && snapshot != null && !"incremental".equals(snapshot) ? FULL_LOAD : CDC;
    Map<String, String> rowImage = after != null ? after : before;
    Map<String, String> rowKey = configuredKey(primaryKeys, tableId, rowImage);
    if (rowKey == null && kafkaKey != null) {
      // the message key's values are encoded as the row's: the row's converted value of a key column wins
      rowKey = new LinkedHashMap<>();
      for (Map.Entry<String, String> k : kafkaKey.entrySet()) {
        String v = rowImage == null ? null : rowImage.get(k.getKey());
        rowKey.put(k.getKey(), v != null ? v : k.getValue());
      }
    }

    // 3. the reason, then the records of what decoded
    boolean keyless = rowKey == null;
    String reason = reason(env, j, isFlat, flatRow, heartbeat, isChange, opCode, op, tableId, before, after, keyless);
    // the message's shape, which its topic must share (jobs/decode/stage.py decide_topic_shapes)
    String shape = heartbeat ? null : isFlat ? (flatRow != null && !flatRow.isEmpty() ? UNWRAPPED : null)
        : j.corrupt ? null : ENVELOPE;
    if (reason != null) {
      return outcome("tombstone".equals(reason) || "heartbeat".equals(reason) ? IGNORED : QUARANTINED, reason,
          tableId, null, shape);
    }
    String txId = env.txId != null ? env.txId : src == null ? null : src[TX_ID];
    Long sourceMillis = src == null ? null : DebeziumTypes.tryLong(src[TS_MS]);
    Instant eventTime = millis(sourceMillis != null ? sourceMillis : env.tsMs);
    Record r = new Record(tableId, phase, position, txId, env.txTotalOrder, eventTime, types, lineage);
    List<Row> records = new ArrayList<>(2);
    if ("BEGIN".equals(env.status) || "END".equals(env.status)) {
      String marker = "BEGIN".equals(env.status) ? TX_BEGIN : TX_END;
      Map<String, String> detail = new LinkedHashMap<>();
      detail.put("status", env.status);
      detail.put("id", env.id);
      records.add(marker(null, marker, CDC, null, env.id, env.eventCount, TX_END.equals(marker), millis(env.tsMs),
          detail, lineage));
    } else if (TRUNCATE.equals(op)) {
      records.add(r.row(op, null, null, null, null));
    } else if (MESSAGE.equals(op)) {
      Map<String, String> detail = null;
      if (env.hasMessage) {
        detail = new LinkedHashMap<>();
        detail.put("prefix", env.messagePrefix);
        detail.put("content", env.messageContent);
      }
      records.add(r.row(op, null, null, detail, null));
    } else if (DDL.equals(op)) {
      Map<String, String> detail = new LinkedHashMap<>();
      detail.put("ddl", change.ddl);
      detail.put("table_changes", change.tableChanges);
      records.add(r.row(op, null, null, detail, null));
    } else if (!keyless && INSERT.equals(op) && present != null && oldKey != null) {
      // a key change's create whose image lacks unchanged TOAST values: its before image is the old key
      // (the __debezium.oldkey header), so that the fold moves the old key's row to the new key first
      records.add(r.row(op, rowKey, oldKey, clean, present));
    } else if (!keyless) {
      records.add(r.row(op, rowKey, before, clean, present));
    } else if (UPDATE.equals(op) && before != null) {
      // no key anywhere: the whole row is its identity, so an update is a delete of the old row and an
      // insert of the new one
      records.add(r.row(DELETE, before, before, null, null));
      records.add(r.row(INSERT, clean, null, clean, present));
    } else if (DELETE.equals(op)) {
      records.add(r.row(op, before, before, null, null));
    } else {
      records.add(r.row(op, clean, before, clean, present));
    }
    // the snapshot's last row also ends the load: of its table, or of every table of the snapshot
    if (FULL_LOAD.equals(phase) && ("last".equals(snapshot) || "last_in_data_collection".equals(snapshot))) {
      Map<String, String> scope = new LinkedHashMap<>();
      scope.put("scope", "last".equals(snapshot) ? "all" : "table");
      records.add(marker(tableId, LOAD_END, FULL_LOAD, position, null, null, null, eventTime, scope, lineage));
    }
    return outcome(DECODED, null, tableId, records, shape);
  }

  private String reason(Envelope env, Parsed j, boolean isFlat, Map<String, String> flatRow, boolean heartbeat,
                        boolean isChange, String opCode, String op, String tableId, Map<String, String> before,
                        Map<String, String> after, boolean keyless) {
    boolean txStatus = "BEGIN".equals(env.status) || "END".equals(env.status);
    if (txStatus && env.id == null) return "transaction metadata without an id";
    if (txStatus) return null;
    if (heartbeat) return "heartbeat";
    if (j.corrupt && !isFlat) return "malformed JSON or not a JSON object";
    if (isFlat && flatRow != null && flatRow.isEmpty()) return "not a Debezium envelope: no op, before, after or source";
    if (isChange) return null;
    if (opCode == null) return "missing 'op'";
    if (op == null) return "unknown operation type '" + opCode + "'";
    if (tableId == null) return "no source table";  // a logical-decoding message without its source block too
    if ((SNAPSHOT.equals(op) || INSERT.equals(op) || UPDATE.equals(op)) && after == null) {
      return "'after' is null for op '" + opCode + "'";
    }
    if (DELETE.equals(op) && before == null && keyless) return "delete has neither a 'before' image nor a message key";
    if (UPDATE.equals(op) && before == null && keyless) {
      return "update has no key and no 'before' image: give " + keySetting + ", send message keys, "
          + "or set REPLICA IDENTITY FULL on a PostgreSQL source";
    }
    return null;
  }

  private DebeziumTypes.RowSpecs specs(String schema) {
    if (specs == null) specs = new ConcurrentHashMap<>();
    DebeziumTypes.RowSpecs found = specs.get(schema);
    if (found == null) {
      found = DebeziumTypes.rowSpecs(schema);
      if (specs.size() < 10_000) specs.put(schema, found);
    }
    return found;
  }

  private Map<String, String> withoutUnavailable(Map<String, String> image) {
    Map<String, String> out = null;
    for (Map.Entry<String, String> e : image.entrySet()) {
      if (e.getValue() != null && unavailable.contains(e.getValue())) {
        if (out == null) out = new LinkedHashMap<>(image);
        out.remove(e.getKey());
      }
    }
    return out == null ? image : out;
  }

  private static Map<String, String> withoutMetaColumns(Map<String, String> flat) {
    Map<String, String> out = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : flat.entrySet()) {
      if (!e.getKey().startsWith("__")) out.put(e.getKey(), e.getValue());
    }
    return out;
  }

  /** A Kafka message key, {"id": 1} or {"schema": ..., "payload": {"id": 1}}, as a map; else null. */
  private static Map<String, String> keyFromMessageKey(byte[] key) {
    Map<String, String> parsed = Json.parseMap(key);
    if (parsed != null && parsed.containsKey("payload") && parsed.containsKey("schema")) {
      return Json.parseMap(parsed.get("payload"));
    }
    return parsed;
  }

  private static Map<String, String> oldKeyHeader(scala.collection.Seq<Row> headers) {
    Iterator<Row> it = scala.jdk.javaapi.CollectionConverters.asJava(headers.iterator());
    while (it.hasNext()) {
      Row h = it.next();
      if (h != null && OLD_KEY_HEADER.equals(h.getString(0))) {
        return h.isNullAt(1) ? null : keyFromMessageKey((byte[]) h.get(1));
      }
    }
    return null;
  }

  // ---- positions: each connector's own log position, encoded so that string order is source order ----
  static String sourcePosition(String[] src) {
    if (src == null || src[CONNECTOR] == null) return null;
    switch (src[CONNECTOR].toLowerCase(Locale.ROOT)) {
      case "postgresql":
        if (src[LSN] == null) return null;
        String commit = firstSequenceNumber(src[SEQUENCE]);
        return joined(padUnsigned(commit != null ? commit : src[LSN], 20), padUnsigned(src[LSN], 20));
      case "sqlserver":
        if (src[COMMIT_LSN] == null) return null;
        return joined(src[COMMIT_LSN].toUpperCase(Locale.ROOT),
            src[CHANGE_LSN] == null ? "" : src[CHANGE_LSN].toUpperCase(Locale.ROOT),
            padUnsigned(src[EVENT_SERIAL_NO] == null ? "0" : src[EVENT_SERIAL_NO], 20));
      case "mysql":
        if (src[FILE] == null || src[POS] == null) return null;
        Matcher m = TRAILING_DIGITS.matcher(src[FILE]);
        return joined(padUnsigned(m.find() ? m.group(1) : "", 20), padUnsigned(src[POS], 20),
            padUnsigned(src[ROW] == null ? "0" : src[ROW], 10));
      case "oracle":
        if (src[SCN] == null) return null;
        return joined(padUnsigned(src[COMMIT_SCN] != null ? src[COMMIT_SCN] : src[SCN], 20), padUnsigned(src[SCN], 20));
      default:
        return null;
    }
  }

  /** sequence = '["&lt;last commit lsn&gt;","&lt;lsn&gt;"]': its first number (regexp ^\s*\[\s*"?([0-9]+)). */
  static String firstSequenceNumber(String sequence) {
    if (sequence == null) return null;
    int i = skipSpace(sequence, 0);
    if (i >= sequence.length() || sequence.charAt(i) != '[') return null;
    i = skipSpace(sequence, i + 1);
    if (i < sequence.length() && sequence.charAt(i) == '"') i++;
    int start = i;
    while (i < sequence.length() && sequence.charAt(i) >= '0' && sequence.charAt(i) <= '9') i++;
    return i > start ? sequence.substring(start, i) : null;
  }

  private static int skipSpace(String s, int i) {
    while (i < s.length() && " \t\n\u000B\f\r".indexOf(s.charAt(i)) >= 0) i++;
    return i;
  }

  /** concat_ws('.', ...): the parts that are not null. */
  private static String joined(String... parts) {
    StringBuilder out = new StringBuilder();
    for (String part : parts) {
      if (part == null) continue;
      if (out.length() > 0) out.append('.');
      out.append(part);
    }
    return out.toString();
  }

  // ---- rows ---------------------------------------------------------------------------------
  /** What the records of one message share. */
  private final class Record {
    final String tableId, phase, position, txId;
    final Long txSeq;
    final Instant eventTime;
    final Map<String, String> types;
    final Lineage lineage;

    Record(String tableId, String phase, String position, String txId, Long txSeq, Instant eventTime,
           Map<String, String> types, Lineage lineage) {
      this.tableId = tableId;
      this.phase = phase;
      this.position = position;
      this.txId = txId;
      this.txSeq = txSeq;
      this.eventTime = eventTime;
      this.types = types;
      this.lineage = lineage;
    }

    Row row(String op, Map<String, String> key, Map<String, String> before, Map<String, String> after,
            List<String> present) {
      return record(format, tableId, op, phase, key, before, after, present, position, txId, txSeq, null, eventTime,
          types, lineage);
    }
  }

  /** A record that changes no row: a transaction's begin / end, a full load's end. */
  private Row marker(String tableId, String op, String phase, String position, String txId, Long txSeq, Boolean txLast,
                     Instant eventTime, Map<String, String> detail, Lineage lineage) {
    return record(format, tableId == null ? noTable : tableId, op, phase, null, null, detail, null, position, txId,
        txSeq, txLast, eventTime, null, lineage);
  }

  private static String coalesce(String a, String b) {
    return a != null ? a : b;
  }
}
