package io.kvroute.spring.gateway.internal;

import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPipeline;
import org.springframework.boot.reactor.netty.NettyServerCustomizer;
import reactor.netty.NettyPipeline;

/**
 * Keeps an HTTP/1.1 keep-alive connection read after a request that Reactor Netty had queued is
 * answered at once: a workaround for reactor/reactor-netty#4361 (Reactor Netty 1.3.x, fixed after
 * 1.3.8, the newest Spring Boot 4.0 brings).
 *
 * <p>Reactor Netty reads a server connection on demand. A request that arrives before the previous
 * one's operations have terminated is queued with its body; when the previous one terminates, the
 * queue is drained on the event loop. If the queued request is answered during that drain (the
 * filter's 405, 413 or 400, written before the body is read), its own termination finds the queue
 * not yet empty and schedules another drain instead of asking for more bytes; nobody asks, and the
 * connection's next request waits in the socket until the client gives up. This handler, placed
 * after Reactor Netty's HTTP traffic handler, sees every termination and asks for the connection's
 * next bytes once the tasks Reactor Netty scheduled for it have run. Asking when a read is already
 * pending changes nothing.
 *
 * <p>Thread-safety: Netty calls it on its connection's event loop only.
 */
public final class KeepAliveReadRearm extends ChannelInboundHandlerAdapter {
  /** Its name in a connection's pipeline. */
  public static final String NAME = "kvroute.keepAliveReadRearm";

  /** Reactor Netty's (package-private) event: a request's server operations terminated. */
  static final String TERMINATED_EVENT =
      "reactor.netty.http.server.HttpServerOperationsTerminatedEvent";

  private KeepAliveReadRearm() {}

  /**
   * Installs the handler on every HTTP/1.1 server connection (one without Reactor Netty's HTTP
   * traffic handler, such as HTTP/2, is left alone).
   */
  public static NettyServerCustomizer customizer() {
    return server ->
        server.doOnChannelInit(
            (observer, channel, remoteAddress) -> {
              ChannelPipeline p = channel.pipeline();
              if (p.get(NettyPipeline.HttpTrafficHandler) != null && p.get(NAME) == null) {
                p.addAfter(NettyPipeline.HttpTrafficHandler, NAME, new KeepAliveReadRearm());
              }
            });
  }

  @Override
  public void userEventTriggered(ChannelHandlerContext ctx, Object evt) throws Exception {
    if (evt != null && TERMINATED_EVENT.equals(evt.getClass().getName())) {
      // after the drain Reactor Netty may just have scheduled for this same event
      ctx.executor()
          .execute(
              () -> {
                Channel ch = ctx.channel();
                if (ch.isActive() && !ch.config().isAutoRead()) {
                  ch.read();
                }
              });
    }
    super.userEventTriggered(ctx, evt);
  }
}
