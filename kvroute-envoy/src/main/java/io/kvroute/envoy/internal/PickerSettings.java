package io.kvroute.envoy.internal;

import io.kvroute.envoy.EndpointPicker.BodyMode;
import java.util.function.LongSupplier;

/**
 * An {@link io.kvroute.envoy.EndpointPicker}'s options, resolved and validated by its builder.
 *
 * @param requestBodyMode request body mode assumed without Envoy's {@code protocol_config}
 * @param responseBodyMode response body mode assumed without {@code protocol_config}
 * @param maxRequestBytes the largest request body accepted
 * @param maxUsageScanBytes the largest non-streamed response body scanned for usage
 * @param destinationNamespace the dynamic metadata namespace of the picked endpoints
 * @param nanoClock the monotonic clock
 */
public record PickerSettings(
    BodyMode requestBodyMode,
    BodyMode responseBodyMode,
    int maxRequestBytes,
    int maxUsageScanBytes,
    String destinationNamespace,
    LongSupplier nanoClock) {}
