package io.kvroute.kubernetes.internal;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import io.fabric8.kubernetes.client.dsl.base.ResourceDefinitionContext;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Gateway API Inference Extension's {@code InferencePool}, read as a generic resource: {@code
 * inference.networking.k8s.io/v1} ({@code spec.selector.matchLabels}, {@code
 * spec.targetPorts[].number}) and {@code inference.networking.x-k8s.io/v1alpha2} ({@code
 * spec.selector} as a plain label map, {@code spec.targetPortNumber}).
 */
public final class InferencePools {
  private InferencePools() {}

  /** {@code inference.networking.k8s.io/v1}. */
  public static final String V1 = "inference.networking.k8s.io/v1";

  /** {@code inference.networking.x-k8s.io/v1alpha2}. */
  public static final String V1ALPHA2 = "inference.networking.x-k8s.io/v1alpha2";

  /**
   * What discovery needs of a pool.
   *
   * @param selector the pods' labels (matchLabels)
   * @param ports the target ports, in order (empty when the pool names none)
   */
  public record Spec(Map<String, String> selector, List<Integer> ports) {
    /** Copies. */
    public Spec {
      selector = Map.copyOf(selector);
      ports = List.copyOf(ports);
    }
  }

  /** The resource definition of {@code apiVersion} ({@link #V1} or {@link #V1ALPHA2}). */
  public static ResourceDefinitionContext context(String apiVersion) {
    int slash = apiVersion.indexOf('/');
    if (slash < 0) {
      throw new IllegalArgumentException(
          "inferencePoolApiVersion must be group/version, was \"" + apiVersion + "\"");
    }
    return new ResourceDefinitionContext.Builder()
        .withGroup(apiVersion.substring(0, slash))
        .withVersion(apiVersion.substring(slash + 1))
        .withKind("InferencePool")
        .withPlural("inferencepools")
        .withNamespaced(true)
        .build();
  }

  /**
   * Reads a pool's selector and ports, either version.
   *
   * @throws IllegalArgumentException naming the field that is missing or malformed
   */
  public static Spec spec(GenericKubernetesResource pool) {
    Object spec = pool.getAdditionalProperties().get("spec");
    if (!(spec instanceof Map<?, ?> s)) {
      throw new IllegalArgumentException("InferencePool has no spec");
    }
    Object selector = s.get("selector");
    if (selector instanceof Map<?, ?> sel && sel.get("matchLabels") instanceof Map<?, ?> ml) {
      selector = ml;
    }
    if (!(selector instanceof Map<?, ?> sel) || sel.isEmpty()) {
      throw new IllegalArgumentException("InferencePool has no spec.selector labels");
    }
    Map<String, String> labels = new LinkedHashMap<>();
    sel.forEach(
        (k, v) -> {
          if (!(k instanceof String) || v instanceof Map || v instanceof List) {
            throw new IllegalArgumentException("InferencePool spec.selector is not a label map");
          }
          labels.put((String) k, String.valueOf(v));
        });
    List<Integer> ports = new ArrayList<>();
    if (s.get("targetPorts") instanceof List<?> tp) {
      for (Object p : tp) {
        if (p instanceof Map<?, ?> m && m.get("number") instanceof Number n) {
          ports.add(port(n));
        } else {
          throw new IllegalArgumentException("InferencePool spec.targetPorts[] has no number");
        }
      }
    } else if (s.get("targetPortNumber") instanceof Number n) {
      ports.add(port(n));
    }
    return new Spec(labels, ports);
  }

  private static int port(Number n) {
    int p = n.intValue();
    if (p < 1 || p > 65535) {
      throw new IllegalArgumentException("InferencePool port must be in 1..65535, was " + n);
    }
    return p;
  }
}
