/**
 * kvroute's one configuration binder: YAML/JSON into immutable records with Jackson, strictly
 * (unknown keys, duplicate keys and wrong types are errors), with one-line errors that name the
 * field's path ({@link io.kvroute.config.ConfigException}), Go/Kubernetes durations ({@link
 * io.kvroute.config.Durations}) and Kubernetes quantities ({@link io.kvroute.config.Quantity}).
 *
 * <p>Every kvroute configuration is bound with {@link io.kvroute.config.ConfigBinder}: the
 * scheduler's {@code EndpointPickerConfig}, {@code kvroute serve}'s JSON, {@code kvroute gateway}'s
 * YAML and the {@code kvConnector} section. The reference of every key is {@code
 * docs/configuration.md}, checked against the records by the tests.
 */
package io.kvroute.config;
