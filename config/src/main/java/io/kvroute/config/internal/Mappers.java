package io.kvroute.config.internal;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationContext;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.MapperFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import com.fasterxml.jackson.databind.cfg.CoercionAction;
import com.fasterxml.jackson.databind.cfg.CoercionInputShape;
import com.fasterxml.jackson.databind.cfg.MapperBuilder;
import com.fasterxml.jackson.databind.deser.std.StdScalarDeserializer;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.module.SimpleModule;
import com.fasterxml.jackson.databind.type.LogicalType;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import io.kvroute.config.Durations;
import io.kvroute.config.Quantity;
import java.io.IOException;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.function.Function;

/**
 * The one place kvroute's configuration {@link ObjectMapper}s are made: strict (unknown keys,
 * duplicate keys, trailing documents, nulls for primitives, floats for integers and scalars of the
 * wrong kind are errors) and with the Go-duration and Kubernetes-quantity deserializers.
 */
public final class Mappers {
  private Mappers() {}

  /**
   * A strict mapper.
   *
   * @param yaml YAML (which reads JSON too) rather than JSON
   * @param snakeCase bind {@code max_body_bytes} to a record component {@code maxBodyBytes}
   */
  public static ObjectMapper create(boolean yaml, boolean snakeCase) {
    MapperBuilder<?, ?> b =
        yaml
            ? YAMLMapper.builder(
                YAMLFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build())
            : JsonMapper.builder(
                JsonFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build());
    b.enable(
        DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES,
        DeserializationFeature.FAIL_ON_READING_DUP_TREE_KEY,
        DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES,
        DeserializationFeature.FAIL_ON_NUMBERS_FOR_ENUMS,
        DeserializationFeature.FAIL_ON_TRAILING_TOKENS);
    b.disable(DeserializationFeature.ACCEPT_FLOAT_AS_INT);
    b.disable(MapperFeature.ALLOW_COERCION_OF_SCALARS);
    // "80" is not a port and 80 is not a host name: no string <-> scalar coercion either way.
    b.withCoercionConfigDefaults(
        c ->
            c.setCoercion(CoercionInputShape.String, CoercionAction.Fail)
                .setCoercion(CoercionInputShape.EmptyString, CoercionAction.Fail));
    b.withCoercionConfig(
        LogicalType.Textual,
        c ->
            c.setCoercion(CoercionInputShape.String, CoercionAction.TryConvert)
                .setCoercion(CoercionInputShape.EmptyString, CoercionAction.TryConvert)
                .setCoercion(CoercionInputShape.Integer, CoercionAction.Fail)
                .setCoercion(CoercionInputShape.Float, CoercionAction.Fail)
                .setCoercion(CoercionInputShape.Boolean, CoercionAction.Fail));
    if (snakeCase) {
      b.propertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE);
    }
    SimpleModule types = new SimpleModule("kvroute-config");
    types.addDeserializer(
        Duration.class,
        new TextOrNumberDeserializer<>(
            Duration.class, Durations::parse, Durations::ofSeconds, Durations.EXPECTED));
    types.addDeserializer(
        Quantity.class,
        new TextOrNumberDeserializer<>(
            Quantity.class, Quantity::parse, Quantity::of, Quantity.EXPECTED));
    b.addModule(types);
    return b.build();
  }

  /**
   * A problem found by one of kvroute's deserializers; its message is already phrased for the user
   * ("must be a duration such as ..., was ...").
   */
  public static final class Problem extends JsonMappingException {
    private static final long serialVersionUID = 1L;

    Problem(JsonParser p, String problem) {
      super(p, problem);
    }
  }

  /**
   * A scalar given as text or as a number ({@link Duration} from {@code "1m30s"}, {@code "PT30S"}
   * or a number of seconds; {@link Quantity} from {@code "32Gi"} or a number); anything else, or
   * text or a number the type refuses, is a {@link Problem} that says what was expected.
   */
  static final class TextOrNumberDeserializer<T> extends StdScalarDeserializer<T> {
    private static final long serialVersionUID = 1L;

    private final transient Function<String, T> fromText;
    private final transient Function<BigDecimal, T> fromNumber;
    private final String expected;

    TextOrNumberDeserializer(
        Class<T> type,
        Function<String, T> fromText,
        Function<BigDecimal, T> fromNumber,
        String expected) {
      super(type);
      this.fromText = fromText;
      this.fromNumber = fromNumber;
      this.expected = expected;
    }

    @Override
    public T deserialize(JsonParser p, DeserializationContext ctxt) throws IOException {
      try {
        JsonToken t = p.currentToken();
        if (t == JsonToken.VALUE_STRING) {
          return fromText.apply(p.getText());
        }
        if (t == JsonToken.VALUE_NUMBER_INT || t == JsonToken.VALUE_NUMBER_FLOAT) {
          return fromNumber.apply(new BigDecimal(p.getText()));
        }
      } catch (IllegalArgumentException e) {
        throw new Problem(p, e.getMessage());
      }
      throw new Problem(p, "must be " + expected + ", was " + Errors.describe(p));
    }
  }
}
