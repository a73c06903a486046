package cdc;

import com.fasterxml.jackson.core.io.schubfach.DoubleToDecimal;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.Charset;
import java.nio.charset.CodingErrorAction;
import java.time.DateTimeException;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.api.java.UDF5;
import org.apache.spark.sql.types.DataType;

import static cdc.Outcomes.*;

/**
 * Alibaba DTS Avro on the JVM side: one message (a DTS {@code Record}) → its decode outcome (status,
 * reason, table_id, change records): the format's one decoder. The record is read with Avro's own
 * reader (Spark ships it): texts value for value, a double as Python's repr writes it, dates and times
 * as Python's datetime does, charsets by MySQL's names, a reason for each value that cannot be read;
 * then keys, positions, key changes, markers and reasons (docs/formats/dts_avro.md;
 * tests/unit/formats/test_dts_avro.py holds it to records encoded by fastavro). Arguments: the
 * message's value, topic, partition, offset and Kafka timestamp (microseconds).
 */
public final class DtsAvroUdf implements UDF5<byte[], String, Integer, Long, Long, Row> {
  private static final long serialVersionUID = 1L;

  private static final String DECIMAL_TYPE = "decimal(38,18)";
  private static final Pattern BINLOG = Pattern.compile("(\\d+)@(\\d+)");
  private static final Pattern FIXED_ZONE = Pattern.compile("(?:UTC|GMT)?([+-])(\\d{1,2}):?(\\d{2})?");
  private static final Object NOT_CAPTURED = new Object();
  private static final ObjectMapper JSON = new ObjectMapper();

  private final String schemaText;
  // MySQL charset names -> Java's (jobs/formats/dts_avro/decoder.py _CHARSETS names Python's codecs for the
  // same ones; latin1 is read apart, see mysqlLatin1; other names are looked up as they are)
  private static final Map<String, String> CHARSETS = new HashMap<>();

  static {
    String[][] names = {{"utf8mb4", "UTF-8"}, {"utf8mb3", "UTF-8"}, {"utf8", "UTF-8"}, {"ucs2", "UTF-16BE"},
      {"utf16", "UTF-16BE"}, {"utf16le", "UTF-16LE"}, {"utf32", "UTF-32BE"}, {"gb2312", "GB2312"}, {"gbk", "GBK"},
      {"gb18030", "GB18030"}, {"big5", "Big5"}, {"ascii", "US-ASCII"}, {"ujis", "EUC-JP"}, {"sjis", "Shift_JIS"},
      {"euckr", "EUC-KR"}, {"koi8r", "KOI8-R"}, {"cp1251", "windows-1251"}, {"cp1250", "windows-1250"}};
    for (String[] n : names) CHARSETS.put(n[0], n[1]);
  }
  private transient Schema schema;
  private transient GenericDatumReader<GenericRecord> reader;
  private transient BinaryDecoder decoder;
  private transient ConcurrentHashMap<String, Object> keyColumns;  // pk_uk_info -> List<String> or NO_KEY

  private final String format;
  private final Outcomes.KeyRules primaryKeys;
  private final String noTable;
  private final TableIds tableIds;

  /** {@code config}: JSON of jobs/formats/dts_avro/decoder.py: the Record schema file's text, --primary-keys and
   * the table-id rules. */
  public DtsAvroUdf(String config) throws IOException {
    JsonNode c = JSON.readTree(config);
    schemaText = c.get("schema").asText();
    format = c.get("format").asText();
    primaryKeys = Outcomes.keyRules(c.get("primary_keys"), c.get("primary_key_globs"));
    noTable = c.get("no_table").asText();
    tableIds = TableIds.fromConfig(c);
  }

  public static void register(SparkSession spark, String name, String config, String returnType) throws IOException {
    spark.udf().register(name, new DtsAvroUdf(config), DataType.fromJson(returnType));
  }

  /** A value that cannot be read (unknown charset, impossible date): its message is the reason. */
  private static final class ValueError extends Exception {
    private static final long serialVersionUID = 1L;

    ValueError(String message) {
      super(message, null, false, false);
    }
  }

  private void open() {
    if (reader != null) return;
    // the file lists the named leaf types first and Record last: parsed as one union
    Schema all = new Schema.Parser().parse(schemaText);
    schema = all.getTypes().get(all.getTypes().size() - 1);
    reader = new GenericDatumReader<>(schema);
    keyColumns = new ConcurrentHashMap<>();
  }

  /** One record as plain columns (jobs/formats/dts_avro/decoder.py _DECODED_COLUMNS). */
  private static final class Columns {
    String error, operation, objectName, txid, sourceTxid, ddl;
    Long recordId, binlogFile, binlogOffset, eventMs;
    List<String> pk, columns;
    Map<String, String> before, after, types;
    List<String> beforeAbsent = new ArrayList<>(), afterAbsent = new ArrayList<>();
  }

  @Override
  public Row call(byte[] value, String topic, Integer partition, Long offset, Long kafkaMicros) {
    if (value == null || value.length == 0) return outcome(IGNORED, "tombstone", null, null);
    Columns c = columns(value);
    return outcomeOf(c, new Lineage(topic, partition, offset, kafkaMicros));
  }

  private Columns columns(byte[] value) {
    open();
    GenericRecord rec;
    int left;
    try {
      decoder = DecoderFactory.get().binaryDecoder(value, decoder);
      BoundedDecoder bounded = new BoundedDecoder(decoder);
      rec = reader.read(null, bounded);
      left = bounded.remaining();
    } catch (IOException | RuntimeException e) {
      return error("not a DTS Avro Record (" + e.getClass().getSimpleName() + ")");
    }
    if (left != 0) return error("not a DTS Avro Record (" + left + " bytes after the record)");
    try {
      return decoded(rec);
    } catch (ValueError e) {
      return error(e.getMessage());
    } catch (RuntimeException e) {
      String text = "unreadable DTS record (" + e.getClass().getSimpleName() + ": " + e.getMessage() + ")";
      return error(text.length() > 300 ? text.substring(0, 300) : text);
    }
  }

  private Columns decoded(GenericRecord rec) throws ValueError {
    Columns c = new Columns();
    Object fields = rec.get("fields");
    c.columns = new ArrayList<>();
    if (fields instanceof List) {
      for (Object f : (List<?>) fields) c.columns.add(text(((GenericRecord) f).get("name")));
    }
    c.types = new LinkedHashMap<>();
    GenericRecord source = (GenericRecord) rec.get("source");
    String sourceType = source == null ? null : text(source.get("sourceType"));
    boolean mysql = "MySQL".equals(sourceType) || "DRDS".equals(sourceType);
    c.before = image(c.columns, rec.get("beforeImages"), c.types, mysql, c.beforeAbsent);
    c.after = image(c.columns, rec.get("afterImages"), c.types, mysql, c.afterAbsent);
    String position = text(rec.get("sourcePosition"));
    Matcher m = BINLOG.matcher(position == null ? "" : position);
    if (m.matches()) {
      c.binlogFile = Long.valueOf(m.group(2));
      c.binlogOffset = Long.valueOf(m.group(1));
    }
    Long ts = (Long) rec.get("sourceTimestamp");
    // DTS writes seconds; a 13-digit value is milliseconds
    c.eventMs = ts == null ? null : Math.abs(ts) >= 100_000_000_000L ? ts : Math.multiplyExact(ts, 1000L);
    c.sourceTxid = text(rec.get("sourceTxid"));
    c.txid = transactionId(c.sourceTxid, text(rec.get("safeSourcePosition")));
    c.operation = text(rec.get("operation"));
    c.objectName = text(rec.get("objectName"));
    c.recordId = (Long) rec.get("id");
    c.pk = primaryKey(rec.get("tags"));
    Object afterImages = rec.get("afterImages");
    c.ddl = afterImages instanceof CharSequence ? afterImages.toString() : null;
    return c;
  }

  /**
   * The transaction a record belongs to: its {@code sourceTxid}, else (MySQL sources send "0" or
   * nothing) its {@code safeSourcePosition}, the position of its transaction's BEGIN, which every record
   * of the transaction carries; null where neither is given.
   */
  static String transactionId(String sourceTxid, String safeSourcePosition) {
    if (sourceTxid != null && !sourceTxid.isEmpty() && !"0".equals(sourceTxid)) return sourceTxid;
    if (safeSourcePosition != null && !safeSourcePosition.isEmpty()) return "begin@" + safeSourcePosition;
    return null;
  }

  private static Columns error(String reason) {
    Columns c = new Columns();
    c.error = reason;
    return c;
  }

  // ---- outcomes (the Spark SQL side of jobs/formats/dts_avro/decoder.py) ------------------------------
  private static final Map<String, String> ROW_OPS = Map.of("INSERT", INSERT, "UPDATE", UPDATE, "DELETE", DELETE,
      "INIT", SNAPSHOT);
  private static final Map<String, String> TX_OPS = Map.of("BEGIN", TX_BEGIN, "COMMIT", TX_END, "ROLLBACK", TX_END,
      "ABORT", TX_END);
  private static final Map<String, String> IGNORED_OPS = Map.of("HEARTBEAT", "heartbeat", "CHECKPOINT",
      "DTS control record", "COMMAND", "DTS control record", "FILL", "DTS control record", "FINISH",
      "DTS control record", "CONTROL", "DTS control record", "RDB", "DTS control record", "NOOP", "DTS control record");
  private static final Pattern LEADING_COMMENTS = Pattern.compile("^(\\s|/\\*.*?\\*/|--[^\\n]*\\n|#[^\\n]*\\n)*");
  private static final Pattern TRUNCATE_STATEMENT = Pattern.compile("^TRUNCATE\\b");

  private Row outcomeOf(Columns c, Lineage lineage) {
    String op = c.operation;
    String tableId = tableId(c.objectName, "DDL".equals(op));
    if (c.error != null) return outcome(QUARANTINED, c.error, tableId, null);
    String ignored = op == null ? null : IGNORED_OPS.get(op);
    if (ignored != null) return outcome(IGNORED, ignored, tableId, null);
    boolean isDdl = "DDL".equals(op);
    String reason = null;
    if (!TX_OPS.containsKey(op)) {
      if (!isDdl && !ROW_OPS.containsKey(op)) reason = "unknown operation '" + op + "'";
      else if (tableId == null && isDdl && c.ddl == null) reason = "DDL without a statement";
      else if (tableId == null && !isDdl) reason = "no objectName";
      else if (("INSERT".equals(op) || "INIT".equals(op)) && c.after == null) reason = op + " without afterImages";
      else if ("UPDATE".equals(op) && c.after == null) reason = "UPDATE without afterImages";
      else if ("DELETE".equals(op) && c.before == null) reason = "DELETE without beforeImages";
    }
    if (reason != null) return outcome(QUARANTINED, reason, tableId, null);

    String position = String.join(".", padUnsigned(String.valueOf(c.binlogFile == null ? 0 : c.binlogFile), 10),
        padUnsigned(String.valueOf(c.binlogOffset == null ? 0 : c.binlogOffset), 20),
        padUnsigned(String.valueOf(c.recordId == null ? 0 : c.recordId), 20));
    java.time.Instant eventTime = millis(c.eventMs);
    List<Row> records = new ArrayList<>(2);
    if (TX_OPS.containsKey(op)) {
      String marker = TX_OPS.get(op);
      Map<String, String> detail = new LinkedHashMap<>();
      detail.put("marker", op);
      detail.put("sourceTxid", c.sourceTxid == null || c.sourceTxid.isEmpty() ? null : c.sourceTxid);
      // the marker names its transaction: on a key-partitioned topic only the id ties BEGIN, rows and COMMIT
      records.add(record(format, tableId == null ? noTable : tableId, marker, CDC, null, null, detail, null,
          position, c.txid, null, TX_END.equals(marker), eventTime, null, lineage));
      return outcome(DECODED, null, tableId, records);
    }
    // a column DTS did not capture (EmptyObject NONE) is left out of the after image; a key column so
    // left out did not change (DTS captures a changed key), so the new key takes the before value
    // (afterAbsent is only ever filled while reading an after image, so it implies one)
    Map<String, String> keyImage = c.after;
    if (c.before != null && !c.afterAbsent.isEmpty()) {
      keyImage = new LinkedHashMap<>();
      for (Map.Entry<String, String> e : c.before.entrySet()) {
        if (c.afterAbsent.contains(e.getKey())) keyImage.put(e.getKey(), e.getValue());
      }
      keyImage.putAll(c.after);
    }
    Map<String, String> newKey = key(tableId, keyImage, c.pk);
    Map<String, String> oldKey = key(tableId, c.before, c.pk);
    // columns DTS could not capture (EmptyObject NONE) keep their prior value
    List<String> partial = !c.afterAbsent.isEmpty() ? new ArrayList<>(c.after.keySet()) : null;
    boolean keyChanged = c.before != null && !(oldKey != null && newKey != null
        && new ArrayList<>(oldKey.entrySet()).equals(new ArrayList<>(newKey.entrySet())));
    if (isDdl) {
      if (c.ddl != null && isTruncate(c.ddl)) {
        records.add(record(format, tableId, TRUNCATE, CDC, null, null, null, null, position, c.txid, null, null,
            eventTime, c.types, lineage));
      } else {
        Map<String, String> detail = new LinkedHashMap<>();
        detail.put("ddl", c.ddl);
        records.add(record(format, tableId, DDL, CDC, null, null, detail, null, position, c.txid, null, null,
            eventTime, c.types, lineage));
      }
    } else if ("INIT".equals(op) || "INSERT".equals(op)) {
      records.add(record(format, tableId, ROW_OPS.get(op), "INIT".equals(op) ? FULL_LOAD : CDC, newKey, null, c.after,
          partial, position, c.txid, null, null, eventTime, c.types, lineage));
    } else if ("UPDATE".equals(op) && keyChanged) {
      records.add(record(format, tableId, DELETE, CDC, oldKey, c.before, null, null, position, c.txid, null, null,
          eventTime, c.types, lineage));
      // with the before image: the fold moves the old key's row (columns not captured)
      records.add(record(format, tableId, INSERT, CDC, newKey, c.before, c.after, partial, position, c.txid, null,
          null, eventTime, c.types, lineage));
    } else if ("UPDATE".equals(op)) {
      records.add(record(format, tableId, UPDATE, CDC, newKey, c.before, c.after, partial, position, c.txid, null,
          null, eventTime, c.types, lineage));
    } else {
      records.add(record(format, tableId, DELETE, CDC, oldKey, c.before, null, null, position, c.txid, null, null,
          eventTime, c.types, lineage));
    }
    return outcome(DECODED, null, tableId, records);
  }

  /** --primary-keys, else the record's pk_uk_info columns, else the whole image. */
  private Map<String, String> key(String tableId, Map<String, String> image, List<String> pk) {
    Map<String, String> key = configuredKey(primaryKeys, tableId, image);
    if (key != null) return key;
    if (image != null && pk != null) {
      key = new LinkedHashMap<>();
      for (String col : pk) key.put(col, image.get(col));
      return key;
    }
    return image;
  }

  /** objectName db.table or db.schema.table (a DDL may name its database alone, or nothing). */
  private String tableId(String name, boolean ddl) {
    String[] parts = name == null ? null : name.split("\\.", -1);
    if (ddl && (parts == null || parts.length == 1)) return tableIds.of(parts == null ? null : parts[0], null, null);
    if (parts == null) return null;
    if (parts.length == 2) return tableIds.of(parts[0], null, parts[1]);
    if (parts.length >= 3) {
      return tableIds.of(parts[0], parts[1], String.join(".", java.util.Arrays.asList(parts)
          .subList(2, Math.min(parts.length, 101))));
    }
    return tableIds.of(null, null, parts[0]);
  }

  /** Whether a DDL statement is a TRUNCATE; leading comments do not hide it (common.is_truncate). */
  private static boolean isTruncate(String sql) {
    String stripped = LEADING_COMMENTS.matcher(sql).replaceAll("");
    return TRUNCATE_STATEMENT.matcher(stripped.toUpperCase(Locale.ROOT)).find();
  }

  private Map<String, String> image(List<String> columns, Object values, Map<String, String> types, boolean mysql,
                                    List<String> absent) throws ValueError {
    if (!(values instanceof List)) return null;
    List<?> items = (List<?>) values;
    if (items.size() != columns.size()) {
      throw new ValueError("image has " + items.size() + " values for " + columns.size() + " fields");
    }
    Map<String, String> image = new LinkedHashMap<>();
    String[] typed = new String[1];
    for (int i = 0; i < items.size(); i++) {
      String name = columns.get(i);
      typed[0] = null;
      Object v = value(items.get(i), mysql, typed);
      if (v == NOT_CAPTURED) {
        absent.add(name);
        continue;
      }
      image.put(name, (String) v);
      if (typed[0] != null) types.put(name, typed[0]);
    }
    return image;
  }

  /** One image value → its canonical text (or null, or NOT_CAPTURED); its state type into {@code type[0]}. */
  private Object value(Object item, boolean mysql, String[] type) throws ValueError {
    if (item == null) return null;
    if (item instanceof GenericData.EnumSymbol) {  // EmptyObject: NULL a null value, NONE one DTS did not capture
      return "NONE".equals(item.toString()) ? NOT_CAPTURED : null;
    }
    GenericRecord v = (GenericRecord) item;
    String kind = v.getSchema().getName();
    switch (kind) {
      case "Integer":
        type[0] = "bigint";
        return text(v.get("value"));
      case "Character":
        return character(v, type);
      case "Decimal":
        // precision and scale are the value's, not the column's, which no message tells
        type[0] = DECIMAL_TYPE;
        return text(v.get("value"));
      case "Float":
        type[0] = "double";
        return pythonRepr((Double) v.get("value"));
      case "Timestamp":
        type[0] = "timestamp";
        long seconds = (Long) v.get("timestamp");
        Integer millis = (Integer) v.get("millis");
        // MySQL's zero TIMESTAMP is stored as 0, which no real TIMESTAMP can be
        if (mysql && seconds == 0 && (millis == null || millis == 0)) return null;
        return timestampText(LocalDateTime.of(1970, 1, 1, 0, 0).plusSeconds(seconds)
            .plusNanos(1000L * (millis == null ? 0 : millis)));
      case "DateTime":
        String[] out = dateTime(v);
        type[0] = out[1];
        return out[0];
      case "TimestampWithTimeZone":
        String[] zoned = zoned(v);
        type[0] = zoned[1];
        return zoned[0];
      case "BinaryGeometry":
      case "BinaryObject":
        type[0] = "binary";
        return Base64.getEncoder().encodeToString(bytes(v.get("value")));
      case "TextGeometry":
      case "TextObject":
        type[0] = "string";
        return text(v.get("value"));
      default:
        throw new ValueError("unknown value type '" + v.getSchema().getFullName() + "'");
    }
  }

  private String character(GenericRecord v, String[] type) throws ValueError {
    String charset = text(v.get("charset"));
    charset = charset == null || charset.isEmpty() ? "utf8mb4" : charset.toLowerCase(Locale.ROOT);
    byte[] raw = bytes(v.get("value"));
    if (charset.equals("binary")) {
      type[0] = "binary";
      return Base64.getEncoder().encodeToString(raw);
    }
    type[0] = "string";
    if (charset.equals("latin1")) return mysqlLatin1(raw);
    Charset codec;
    try {
      codec = Charset.forName(CHARSETS.getOrDefault(charset, charset));
    } catch (IllegalArgumentException e) {
      throw new ValueError("unknown charset '" + charset + "'");
    }
    try {
      return codec.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(raw)).toString();
    } catch (CharacterCodingException e) {
      throw new ValueError("value is not valid " + charset);
    }
  }

  // MySQL's latin1 is cp1252 but for the five bytes cp1252 leaves undefined, which MySQL reads as the C1
  // controls of the same number, as ISO-8859-1 does
  private static final char[] LATIN1 = new char[256];

  static {
    for (int b = 0; b < 256; b++) {
      String cp1252 = new String(new byte[] {(byte) b}, Charset.forName("windows-1252"));
      LATIN1[b] = b >= 0x80 && b < 0xA0 && !cp1252.equals("\uFFFD") ? cp1252.charAt(0) : (char) b;
    }
  }

  private static String mysqlLatin1(byte[] raw) {
    char[] out = new char[raw.length];
    for (int i = 0; i < raw.length; i++) out[i] = LATIN1[raw[i] & 0xFF];
    return new String(out);
  }

  // ---- dates and times, as Python's datetime reads and writes them ---------------------------------
  private static final String OVERFLOW = "unreadable DTS record (OverflowError: date value out of range)";

  private static String timestampText(LocalDateTime ts) throws ValueError {
    if (ts.getYear() < 1 || ts.getYear() > 9999) throw new ValueError(OVERFLOW);
    return String.format("%04d-%02d-%02d %02d:%02d:%02d.%06d", ts.getYear(), ts.getMonthValue(), ts.getDayOfMonth(),
        ts.getHour(), ts.getMinute(), ts.getSecond(), ts.getNano() / 1000);
  }

  private static int or0(Integer v) {
    return v == null ? 0 : v;
  }

  /** A DateTime → {text or null, state type}: a date, a timestamp, a time of day or a year. */
  private static String[] dateTime(GenericRecord v) throws ValueError {
    Integer y = (Integer) v.get("year"), mo = (Integer) v.get("month"), d = (Integer) v.get("day");
    Integer h = (Integer) v.get("hour"), mi = (Integer) v.get("minute"), s = (Integer) v.get("second");
    int micros = or0((Integer) v.get("millis"));  // named millis, the field carries microseconds
    if (y != null && mo != null && d != null) {
      LocalDateTime ts;
      try {  // MySQL zero dates (0000-00-00) are no dates
        if (y < 1 || y > 9999) throw new DateTimeException("year");
        if (h == null) return new String[] {LocalDate.of(y, mo, d).toString(), "date"};
        ts = LocalDateTime.of(y, mo, d, h, or0(mi), or0(s));
      } catch (DateTimeException e) {
        return new String[] {null, h == null ? "date" : "timestamp"};
      }
      return new String[] {timestampText(ts.plusNanos(1000L * micros)), "timestamp"};
    }
    if (y == null && h != null) {  // a TIME; a negative one comes with every component negated
      int[] parts = {h, or0(mi), or0(s), micros};
      boolean negative = false;
      for (int p : parts) negative |= p < 0;
      String text = String.format("%s%02d:%02d:%02d", negative ? "-" : "", Math.abs(parts[0]), Math.abs(parts[1]),
          Math.abs(parts[2]));
      return new String[] {parts[3] != 0 ? text + String.format(".%06d", Math.abs(parts[3])) : text, "string"};
    }
    if (y != null) return new String[] {String.valueOf(y), "int"};  // a YEAR
    return new String[] {null, "string"};
  }

  /** A TimestampWithTimeZone → its UTC timestamp, or a time of day's UTC time ending in Z. */
  private static String[] zoned(GenericRecord v) throws ValueError {
    String[] local = dateTime((GenericRecord) v.get("value"));
    if (local[0] == null) return new String[] {null, "timestamp"};
    String tz = text(v.get("timezone"));
    tz = tz == null ? "" : tz.strip();
    Integer offsetSeconds = null;
    ZoneId zone = null;
    Matcher m = FIXED_ZONE.matcher(tz);
    if (m.matches()) {
      int seconds = Integer.parseInt(m.group(2)) * 3600 + (m.group(3) == null ? 0 : Integer.parseInt(m.group(3)) * 60);
      if (seconds >= 86400) {
        throw new ValueError("unreadable DTS record (ValueError: offset must be a timedelta strictly between "
            + "-timedelta(hours=24) and timedelta(hours=24).)");
      }
      offsetSeconds = m.group(1).equals("+") ? seconds : -seconds;
    } else if (tz.isEmpty() || tz.equals("UTC") || tz.equals("GMT") || tz.equals("Z")) {
      offsetSeconds = 0;
    } else {
      try {
        zone = ZoneId.of(tz);
      } catch (DateTimeException e) {
        throw new ValueError("unknown time zone '" + tz + "'");
      }
    }
    if (local[1].equals("string")) {  // PostgreSQL's timetz: the UTC time, written as Debezium's ZonedTime
      if (offsetSeconds == null) {
        throw new ValueError("time of day with the named zone '" + tz + "', which has no fixed offset");
      }
      LocalTime time;
      try {
        time = LocalTime.parse(local[0]);
      } catch (DateTimeException e) {
        throw new ValueError("unreadable DTS record (ValueError: Invalid isoformat string: '" + local[0] + "')");
      }
      LocalTime utc = time.minusSeconds(offsetSeconds);
      String text = String.format("%02d:%02d:%02d", utc.getHour(), utc.getMinute(), utc.getSecond());
      return new String[] {(utc.getNano() != 0 ? text + String.format(".%06d", utc.getNano() / 1000) : text) + "Z",
        "string"};
    }
    LocalDateTime naive;
    if (local[1].equals("date")) naive = LocalDate.parse(local[0]).atStartOfDay();
    else if (local[1].equals("timestamp")) naive = LocalDateTime.parse(local[0].replace(' ', 'T'));
    else throw new ValueError("unreadable DTS record (ValueError: Invalid isoformat string: '" + local[0] + "')");
    LocalDateTime utc = offsetSeconds != null ? naive.minusSeconds(offsetSeconds)
        : naive.atZone(zone).withZoneSameInstant(java.time.ZoneOffset.UTC).toLocalDateTime();
    return new String[] {timestampText(utc), "timestamp"};
  }

  /** A double as Python's repr writes it: the shortest digits that read back, fixed notation for
   * exponents -4..15 (with ".0" when whole), else d.ddde+XX. */
  static String pythonRepr(double d) {
    if (Double.isNaN(d)) return "nan";
    if (Double.isInfinite(d)) return d > 0 ? "inf" : "-inf";
    String sign = (d < 0 || (d == 0 && 1 / d < 0)) ? "-" : "";
    if (d == 0) return sign + "0.0";
    // Schubfach (Jackson's): the shortest decimal that reads back, as d.dddE±x or plain d.ddd
    String shortest = DoubleToDecimal.toString(Math.abs(d));
    int e = shortest.indexOf('E');
    String mantissa = e < 0 ? shortest : shortest.substring(0, e);
    int exponent = e < 0 ? 0 : Integer.parseInt(shortest.substring(e + 1));
    int point = mantissa.indexOf('.');
    String digits = mantissa.substring(0, point) + mantissa.substring(point + 1);
    exponent += point - 1;  // value = d.ddd x 10^exponent over the digits with leading zeros below
    int lead = 0;
    while (lead < digits.length() - 1 && digits.charAt(lead) == '0') {
      lead++;
      exponent--;
    }
    digits = digits.substring(lead).replaceAll("0+$", "");
    if (digits.isEmpty()) digits = "0";
    if (digits.length() == 2) {
      // Java writes at least two digits; where one reads back too (subnormals: 5e-324), Python's repr
      // writes the one closest to the value
      java.math.BigDecimal exact = new java.math.BigDecimal(Math.abs(d)), best = null;
      for (int candidate = digits.charAt(0) - '0'; candidate <= digits.charAt(0) - '0' + 1; candidate++) {
        java.math.BigDecimal one = new java.math.BigDecimal(java.math.BigInteger.valueOf(candidate), -exponent);
        if (candidate > 0 && one.doubleValue() == Math.abs(d)
            && (best == null || one.subtract(exact).abs().compareTo(best.subtract(exact).abs()) < 0)) {
          best = one;
        }
      }
      if (best != null) {
        String plain = best.unscaledValue().toString();
        exponent += plain.length() - 1;
        digits = plain.replaceAll("0+$", "");
      }
    }
    StringBuilder out = new StringBuilder(sign);
    if (exponent >= -4 && exponent < 16) {
      if (exponent < 0) {
        out.append("0.");
        for (int i = -1; i > exponent; i--) out.append('0');
        out.append(digits);
      } else if (digits.length() > exponent + 1) {
        out.append(digits, 0, exponent + 1).append('.').append(digits.substring(exponent + 1));
      } else {
        out.append(digits);
        for (int i = digits.length(); i < exponent + 1; i++) out.append('0');
        out.append(".0");
      }
    } else {
      out.append(digits.charAt(0));
      if (digits.length() > 1) out.append('.').append(digits.substring(1));
      out.append('e').append(exponent < 0 ? '-' : '+');
      int abs = Math.abs(exponent);
      out.append(abs < 10 ? "0" : "").append(abs);
    }
    return out.toString();
  }

  // ---- keys and small things -------------------------------------------------------------------
  private static final Object NO_KEY = new Object();

  /** tags' pk_uk_info ({"PRIMARY":["id"]}; the first unique key without PRIMARY) → key columns. */
  private List<String> primaryKey(Object tags) {
    if (!(tags instanceof Map)) return null;
    Object info = null;
    for (Map.Entry<?, ?> e : ((Map<?, ?>) tags).entrySet()) {
      if ("pk_uk_info".equals(text(e.getKey()))) info = e.getValue();
    }
    String text = text(info);
    if (text == null || text.isEmpty()) return null;
    Object found = keyColumns.get(text);
    if (found == null) {
      found = keyColumnsOf(text);
      if (keyColumns.size() < 10_000) keyColumns.put(text, found);
    }
    @SuppressWarnings("unchecked")
    List<String> cols = found == NO_KEY ? null : (List<String>) found;
    return cols;
  }

  private static Object keyColumnsOf(String info) {
    JsonNode keys;
    try {
      keys = JSON.readTree(info);
    } catch (IOException e) {
      return NO_KEY;
    }
    if (keys == null || !keys.isObject() || keys.isEmpty()) return NO_KEY;
    JsonNode primary = null;
    for (Iterator<Map.Entry<String, JsonNode>> it = keys.properties().iterator(); it.hasNext(); ) {
      Map.Entry<String, JsonNode> e = it.next();
      if (e.getKey().toUpperCase(Locale.ROOT).equals("PRIMARY")) {
        primary = e.getValue();
        break;
      }
    }
    JsonNode cols = truthy(primary) ? primary : keys.properties().iterator().next().getValue();
    if (cols == null || !cols.isArray() || cols.isEmpty()) return NO_KEY;
    List<String> out = new ArrayList<>();
    for (JsonNode c : cols) {
      if (!c.isTextual()) return NO_KEY;
      out.add(c.asText());
    }
    return out;
  }

  /** Python's truth of a JSON value. */
  private static boolean truthy(JsonNode v) {
    if (v == null || v.isNull()) return false;
    if (v.isBoolean()) return v.asBoolean();
    if (v.isNumber()) return v.doubleValue() != 0;
    if (v.isTextual()) return !v.asText().isEmpty();
    return !v.isEmpty();
  }

  private static String text(Object v) {
    return v == null ? null : v.toString();
  }

  private static byte[] bytes(Object v) {
    ByteBuffer b = ((ByteBuffer) v).duplicate();
    byte[] out = new byte[b.remaining()];
    b.get(out);
    return out;
  }

}
