package io.kvroute.scoring.internal;

import io.kvroute.scoring.SchedulerPlugin;
import io.kvroute.scoring.SchedulerPluginProvider;
import java.util.function.BiFunction;

/**
 * Base of kvroute's own plugin providers: a type name, a parameters record and a factory. The
 * subclasses are public with a no-argument constructor so that {@link java.util.ServiceLoader}
 * instantiates them from {@code META-INF/services}.
 *
 * @param <P> the parameters record
 */
abstract class Builtin<P> implements SchedulerPluginProvider<P> {
  private final String type;
  private final Class<P> parameters;
  private final BiFunction<P, Context, SchedulerPlugin> factory;

  Builtin(String type, Class<P> parameters, BiFunction<P, Context, SchedulerPlugin> factory) {
    this.type = type;
    this.parameters = parameters;
    this.factory = factory;
  }

  @Override
  public final String type() {
    return type;
  }

  @Override
  public final Class<P> parametersType() {
    return parameters;
  }

  @Override
  public final SchedulerPlugin create(P p, Context context) {
    return factory.apply(p, context);
  }

  @Override
  public String toString() {
    return "builtin plugin " + type;
  }
}
