/**
 * kvroute's one configuration binder: YAML/JSON into immutable records, strictly, with errors that
 * name the field path ({@link io.kvroute.config.ConfigBinder}, {@link
 * io.kvroute.config.ConfigException}). Modules whose records it binds open their packages to {@code
 * com.fasterxml.jackson.databind}.
 */
module io.kvroute.config {
  requires transitive com.fasterxml.jackson.databind;
  requires com.fasterxml.jackson.dataformat.yaml;

  exports io.kvroute.config;
}
