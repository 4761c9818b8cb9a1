package io.kvroute.edge.internal;

import io.netty.channel.EventLoop;
import io.netty.channel.epoll.EpollTcpInfo;
import java.time.Clock;
import java.util.ArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * One event loop's connections and their deadlines: a sweep every tick checks each connection
 * against the (injectable) clock, so that a connection costs no timer of its own and tests can move
 * time. Also caches the {@code Date} header line per second.
 *
 * <p>Confined to its event loop.
 */
final class LoopTimers {
  private final EventLoop loop;
  private final LongSupplier nanoClock;
  private final Clock wallClock;
  private final long tickNanos;
  private final ArrayList<Http1Connection> conns = new ArrayList<>();
  private boolean scheduled;
  private long dateSecond = Long.MIN_VALUE;
  private byte[] dateLine;
  private EpollTcpInfo tcpInfo;

  LoopTimers(EventLoop loop, LongSupplier nanoClock, Clock wallClock, long tickNanos) {
    this.loop = loop;
    this.nanoClock = nanoClock;
    this.wallClock = wallClock;
    this.tickNanos = tickNanos;
  }

  long now() {
    return nanoClock.getAsLong();
  }

  byte[] dateLine() {
    long s = Math.floorDiv(wallClock.millis(), 1000L);
    if (s != dateSecond) {
      dateSecond = s;
      dateLine = Wire.dateLine(s);
    }
    return dateLine;
  }

  /** A {@code TCP_INFO} holder reused by this loop's connections. */
  EpollTcpInfo tcpInfo() {
    if (tcpInfo == null) {
      tcpInfo = new EpollTcpInfo();
    }
    return tcpInfo;
  }

  void add(Http1Connection c) {
    c.timerIndex = conns.size();
    conns.add(c);
    if (!scheduled) {
      scheduled = true;
      loop.scheduleWithFixedDelay(this::sweep, tickNanos, tickNanos, TimeUnit.NANOSECONDS);
    }
  }

  void remove(Http1Connection c) {
    int i = c.timerIndex;
    if (i < 0 || i >= conns.size() || conns.get(i) != c) {
      return;
    }
    Http1Connection last = conns.remove(conns.size() - 1);
    if (last != c) {
      conns.set(i, last);
      last.timerIndex = i;
    }
    c.timerIndex = -1;
  }

  int size() {
    return conns.size();
  }

  /** Adds this loop's traffic connections per phase to {@code counts} (on the loop). */
  void count(int[] counts) {
    for (Http1Connection c : conns) {
      c.count(counts);
    }
  }

  private void sweep() {
    long now = nanoClock.getAsLong();
    // backwards: a connection that closes removes itself by swapping in one already checked
    for (int i = conns.size() - 1; i >= 0; i--) {
      if (i < conns.size()) {
        conns.get(i).check(now);
      }
    }
  }
}
