package cdc;

import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import org.apache.spark.sql.catalyst.util.DateTimeUtils;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;

/**
 * Debezium's schema section → per column the state's type and the conversion of its value: Kafka
 * Connect types, Decimal bytes, VariableScaleDecimal, io.debezium.time.*. Casts, timestamps' parsing
 * and formatting follow Spark's, so a value reads back as Spark SQL would cast it.
 */
final class DebeziumTypes {
  private DebeziumTypes() {}

  enum Conversion {
    DECIMAL, VARIABLE_DECIMAL, DATE, TS_MILLIS, TS_MICROS, TS_NANOS, ZONED_TS, TIME_MILLIS, TIME_MICROS,
    TIME_NANOS
  }

  /** One column's state type, and how its value is converted (null: kept as sent). */
  static final class Spec {
    final String sparkType;
    final Conversion conversion;
    final int scale;

    Spec(String sparkType, Conversion conversion, int scale) {
      this.sparkType = sparkType;
      this.conversion = conversion;
      this.scale = scale;
    }
  }

  /** The specs of one schema section: columns in their order, and whether any converts. */
  static final class RowSpecs {
    final Map<String, Spec> columns;
    final Map<String, String> types;
    final boolean converts;

    RowSpecs(Map<String, Spec> columns) {
      this.columns = columns;
      Map<String, String> types = new LinkedHashMap<>();
      boolean converts = false;
      for (Map.Entry<String, Spec> e : columns.entrySet()) {
        types.put(e.getKey(), e.getValue().sparkType);
        converts |= e.getValue().conversion != null;
      }
      this.types = Collections.unmodifiableMap(types);
      this.converts = converts;
    }

    Map<String, String> convert(Map<String, String> image) {
      if (image == null || !converts) return image;
      LinkedHashMap<String, String> out = new LinkedHashMap<>();
      for (Map.Entry<String, String> e : image.entrySet()) {
        Spec spec = columns.get(e.getKey());
        String v = e.getValue();
        out.put(e.getKey(), spec == null || spec.conversion == null ? v : DebeziumTypes.convert(spec, v));
      }
      return out;
    }
  }

  static final RowSpecs NONE = new RowSpecs(Collections.emptyMap());
  private static final ObjectMapper MAPPER = new ObjectMapper(Json.FACTORY);
  private static final Map<String, String> CONNECT_TYPES = new HashMap<>();
  private static final Map<String, Spec> LOGICAL = new HashMap<>();
  private static final Set<String> ENVELOPE_FIELDS = new HashSet<>();

  static {
    String[][] connect = {
      {"int8", "tinyint"}, {"int16", "smallint"}, {"int32", "int"}, {"int64", "bigint"}, {"float32", "float"},
      {"float", "float"}, {"float64", "double"}, {"double", "double"}, {"boolean", "boolean"},
      {"string", "string"}, {"bytes", "binary"},
    };
    for (String[] c : connect) CONNECT_TYPES.put(c[0], c[1]);
    logical(new Spec("date", Conversion.DATE, 0), "io.debezium.time.Date", "org.apache.kafka.connect.data.Date");
    logical(new Spec("timestamp", Conversion.TS_MILLIS, 0), "io.debezium.time.Timestamp",
        "org.apache.kafka.connect.data.Timestamp");
    logical(new Spec("timestamp", Conversion.TS_MICROS, 0), "io.debezium.time.MicroTimestamp");
    logical(new Spec("timestamp", Conversion.TS_NANOS, 0), "io.debezium.time.NanoTimestamp");
    logical(new Spec("timestamp", Conversion.ZONED_TS, 0), "io.debezium.time.ZonedTimestamp");
    logical(new Spec("string", Conversion.TIME_MILLIS, 0), "io.debezium.time.Time",
        "org.apache.kafka.connect.data.Time");
    logical(new Spec("string", Conversion.TIME_MICROS, 0), "io.debezium.time.MicroTime");
    logical(new Spec("string", Conversion.TIME_NANOS, 0), "io.debezium.time.NanoTime");
    logical(new Spec("int", null, 0), "io.debezium.time.Year");
    logical(new Spec("string", null, 0), "io.debezium.data.Json", "io.debezium.data.Enum",
        "io.debezium.data.EnumSet", "io.debezium.data.Uuid", "io.debezium.data.Xml", "io.debezium.time.ZonedTime");
    logical(new Spec("binary", null, 0), "io.debezium.data.Bits");
    Collections.addAll(ENVELOPE_FIELDS, "op", "source", "before", "after");
  }

  private static void logical(Spec spec, String... names) {
    for (String name : names) LOGICAL.put(name, spec);
  }

  // ---- the schema section ------------------------------------------------------------------
  /** Specs of the row image a schema document describes; empty when it describes none or is no JSON. */
  static RowSpecs rowSpecs(String document) {
    JsonNode doc;
    try {
      doc = MAPPER.readTree(document);
    } catch (Exception e) {
      return NONE;
    }
    JsonNode fields = doc != null && doc.isObject() ? doc.get("fields") : null;
    java.util.List<JsonNode> named = new java.util.ArrayList<>();
    if (fields != null && fields.isArray()) {
      for (JsonNode f : fields) if (f.isObject() && truthyName(f.get("field"))) named.add(f);
    }
    for (String wanted : new String[] {"after", "before"}) {
      for (JsonNode f : named) {
        JsonNode inner = f.get("fields");
        if (wanted.equals(f.get("field").asText()) && inner != null && inner.isArray()) {
          Map<String, Spec> columns = new LinkedHashMap<>();
          for (JsonNode c : inner) {
            if (c.isObject() && truthyName(c.get("field"))) columns.put(c.get("field").asText(), columnSpec(c));
          }
          return new RowSpecs(columns);
        }
      }
    }
    for (JsonNode f : named) if (ENVELOPE_FIELDS.contains(f.get("field").asText())) return NONE;
    // no envelope: the schema of an ExtractNewRecordState row, whose fields are the row's columns
    Map<String, Spec> columns = new LinkedHashMap<>();
    for (JsonNode f : named) {
      String name = f.get("field").asText();
      if (!name.startsWith("__")) columns.put(name, columnSpec(f));
    }
    return new RowSpecs(columns);
  }

  private static boolean truthyName(JsonNode field) {
    return field != null && field.isTextual() && !field.asText().isEmpty();
  }

  static Spec columnSpec(JsonNode field) {
    String name = textOr(field.get("name"), "");
    String type = textOr(field.get("type"), "string").toLowerCase(java.util.Locale.ROOT);
    JsonNode params = field.get("parameters");
    if ("org.apache.kafka.connect.data.Decimal".equals(name)) {
      int scale = intParam(params, "scale", 0);
      int precision = Math.min(intParam(params, "connect.decimal.precision", 38), 38);
      return new Spec("decimal(" + precision + "," + Math.min(scale, precision) + ")", Conversion.DECIMAL, scale);
    }
    if ("io.debezium.data.VariableScaleDecimal".equals(name)) {
      return new Spec("decimal(38,18)", Conversion.VARIABLE_DECIMAL, 0);
    }
    Spec logical = LOGICAL.get(name);
    if (logical != null) return logical;
    if (type.equals("array") || type.equals("map") || type.equals("struct")) return new Spec("string", null, 0);
    return new Spec(CONNECT_TYPES.getOrDefault(type, "string"), null, 0);
  }

  private static String textOr(JsonNode node, String otherwise) {
    // Python's `x or default`: a missing, null, empty or false value takes the default
    if (node == null || node.isNull() || (node.isTextual() && node.asText().isEmpty())) return otherwise;
    return node.asText();
  }

  /** Python's int(params.get(name, default)), the default where that fails. */
  private static int intParam(JsonNode params, String name, int otherwise) {
    JsonNode v = params != null && params.isObject() ? params.get(name) : null;
    if (v == null) return otherwise;
    if (v.isIntegralNumber()) return v.intValue();
    if (v.isFloatingPointNumber()) return (int) v.doubleValue();
    if (v.isBoolean()) return v.booleanValue() ? 1 : 0;
    if (v.isTextual()) {
      String s = v.asText().strip();
      if (s.matches("[+-]?[0-9]+(_[0-9]+)*")) {
        try {
          return Integer.parseInt(s.replace("_", ""));
        } catch (NumberFormatException e) {
          return otherwise;
        }
      }
    }
    return otherwise;
  }

  // ---- conversions (Spark SQL's casts and formats) ------------------------------------------
  private static final DateTimeFormatter TIMESTAMP = DateTimeFormatter.ofPattern("uuuu-MM-dd HH:mm:ss.SSSSSS");
  private static final DateTimeFormatter TIME_OF_DAY = DateTimeFormatter.ofPattern("HH:mm:ss.SSSSSS");
  private static final Pattern PLAIN_NUMBER = Pattern.compile("^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$");
  private static final Pattern SIGN_OR_POINT = Pattern.compile("[-.]");
  private static final BigInteger MAX_DECIMAL = BigInteger.TEN.pow(38);

  static String convert(Spec spec, String v) {
    if (v == null) return null;
    switch (spec.conversion) {
      case DECIMAL:
        return decimal(v, spec.scale);
      case VARIABLE_DECIMAL:
        return variableDecimal(v);
      case DATE:
        Integer days = tryInt(v);
        return days == null ? null : LocalDate.ofEpochDay(days).toString();
      case TS_MILLIS:
        return timestamp(times(tryLong(v), 1000), TIMESTAMP);
      case TS_MICROS:
        return timestamp(tryLong(v), TIMESTAMP);
      case TS_NANOS:
        Long nanos = tryLong(v);
        return timestamp(nanos == null ? null : nanos / 1000, TIMESTAMP);
      case ZONED_TS:
        Option<Object> micros = DateTimeUtils.stringToTimestamp(UTF8String.fromString(v), ZoneOffset.UTC);
        return micros.isDefined() ? timestamp((Long) micros.get(), TIMESTAMP) : null;
      case TIME_MILLIS:
        return timeOfDay(tryLong(v), 86_400_000L, 1000);
      case TIME_MICROS:
        return timeOfDay(tryLong(v), 86_400_000_000L, 1);
      case TIME_NANOS:
        Long n = tryLong(v);
        if (n != null && n == 86_400_000_000_000L) return "24:00:00.000000";
        return timestamp(n == null ? null : n / 1000, TIME_OF_DAY);
      default:
        return v;
    }
  }

  /** Base64 big-endian two's-complement unscaled integer → exact decimal text (up to 38 digits). */
  static String decimal(String b64, Integer scale) {
    if (b64 == null) return null;
    // a Decimal sent as a plain JSON number (decimal.format=NUMERIC) is kept as the number it is
    if (PLAIN_NUMBER.matcher(b64).find()
        && (b64.codePointCount(0, b64.length()) % 4 != 0 || SIGN_OR_POINT.matcher(b64).find())) {
      return b64;
    }
    byte[] bytes;
    try {
      bytes = Base64.getMimeDecoder().decode(b64);
    } catch (IllegalArgumentException e) {
      return null;
    }
    if (bytes.length == 0 || scale == null) return null;
    BigInteger unscaled = new BigInteger(bytes);
    BigInteger magnitude = unscaled.abs();
    if (magnitude.compareTo(MAX_DECIMAL) >= 0) return null;
    String digits = magnitude.toString();
    String sign = unscaled.signum() < 0 ? "-" : "";
    if (scale <= 0) return sign + digits;
    StringBuilder padded = new StringBuilder();
    for (int i = digits.length(); i < scale + 1; i++) padded.append('0');
    padded.append(digits);
    int point = padded.length() - scale;
    return sign + padded.substring(0, point) + "." + padded.substring(point);
  }

  /** {"scale": s, "value": base64} → exact decimal text (get_json_object's reading of both fields). */
  private static String variableDecimal(String v) {
    String[] fields = new String[2];
    Json.readText(v, p -> {
      if (p.nextToken() != JsonToken.START_OBJECT) return null;
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken t = p.nextToken();
        int index = "value".equals(name) ? 0 : "scale".equals(name) ? 1 : -1;
        if (index >= 0 && fields[index] == null) fields[index] = Json.text(p, t);
        else p.skipChildren();
      }
      return null;
    }, null);
    return decimal(fields[0], fields[1] == null ? null : tryInt(fields[1]));
  }

  private static String timeOfDay(Long units, long perDay, long microsPerUnit) {
    if (units != null && units == perDay) return "24:00:00.000000";  // PostgreSQL's time '24:00:00'
    return timestamp(times(units, microsPerUnit), TIME_OF_DAY);
  }

  private static Long times(Long value, long factor) {
    if (value == null) return null;
    try {
      return Math.multiplyExact(value, factor);
    } catch (ArithmeticException e) {
      return null;
    }
  }

  static String timestamp(Long micros, DateTimeFormatter format) {
    if (micros == null) return null;
    Instant instant = Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000);
    return LocalDateTime.ofInstant(instant, ZoneOffset.UTC).format(format);
  }

  /** try_cast(v AS BIGINT), as Spark casts text. */
  static Long tryLong(String v) {
    if (v == null) return null;
    try {
      return UTF8String.fromString(v).toLongExact();
    } catch (NumberFormatException e) {
      return null;
    }
  }

  /** try_cast(v AS INT). */
  static Integer tryInt(String v) {
    if (v == null) return null;
    try {
      return UTF8String.fromString(v).toIntExact();
    } catch (NumberFormatException e) {
      return null;
    }
  }

  /** try_cast(v AS DECIMAL(38,0)): Spark trims the text, reads it as a BigDecimal and rounds half up. */
  static BigInteger tryWholeDecimal(String v) {
    if (v == null) return null;
    try {
      BigInteger whole = new BigDecimal(v.trim()).setScale(0, java.math.RoundingMode.HALF_UP).toBigIntegerExact();
      return whole.abs().compareTo(MAX_DECIMAL) >= 0 ? null : whole;
    } catch (NumberFormatException | ArithmeticException e) {
      return null;
    }
  }
}
