package io.kvroute.scoring;

import io.kvroute.connector.Endpoint;
import java.util.Objects;

/**
 * What a stateful {@link Filter} or {@link Scorer} learns when a request it helped schedule was
 * routed ({@link Scheduler#onRouted}) or completed ({@link Scheduler#onComplete}).
 *
 * @param request the scheduled request
 * @param profile the profile the plugin ran in
 * @param endpoint the endpoint the request was sent to for that profile (the decode endpoint for
 *     the decode profile, the prefill endpoint for the prefill profile)
 * @param cold true when no candidate of that profile had any prefix-cache match
 * @param nanoTime the scheduler's clock when the hook ran
 */
public record Routed(
    SchedulingRequest request, String profile, Endpoint endpoint, boolean cold, long nanoTime) {
  /** Rejects nulls. */
  public Routed {
    Objects.requireNonNull(request, "request");
    Objects.requireNonNull(profile, "profile");
    Objects.requireNonNull(endpoint, "endpoint");
  }
}
