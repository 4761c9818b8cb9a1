package io.kvroute.connector.http;

import io.kvroute.connector.FlowRelay;
import io.kvroute.connector.HttpTransport;
import io.kvroute.connector.StreamingResponse;
import io.kvroute.connector.UpstreamException;
import java.io.IOException;
import java.io.InputStream;
import java.io.InterruptedIOException;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Flow;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;
import okhttp3.Call;
import okhttp3.Callback;
import okhttp3.ConnectionPool;
import okhttp3.Dispatcher;
import okhttp3.Headers;
import okhttp3.MediaType;
import okhttp3.OkHttpClient;
import okhttp3.Request;
import okhttp3.RequestBody;
import okhttp3.Response;
import okhttp3.ResponseBody;

/**
 * The {@link HttpTransport} on OkHttp: pooled connections, per-leg timeouts, streaming bodies
 * relayed chunk by chunk as they arrive (never buffered whole), and upstream calls cancelled when
 * the caller cancels.
 *
 * <p>Thread-safe; share one per process. Response heads complete on OkHttp's dispatcher threads;
 * streamed bodies are read on this transport's reader threads (one per open stream, created on
 * demand, daemon, named {@code kvroute-http-reader-N}), which also call the subscriber.
 */
public final class OkHttpTransport implements HttpTransport {
  private static final MediaType JSON = MediaType.get("application/json");

  private final OkHttpClient client;

  /**
   * Clients derived from {@link #client} per (streaming, timeout): an {@code OkHttpClient} built
   * per call costs more than the call's own bookkeeping, and legs use a handful of timeouts.
   * Bounded: past {@value #MAX_DERIVED} distinct timeouts a client is derived per call again.
   */
  private final java.util.concurrent.ConcurrentHashMap<Duration, OkHttpClient> streamingClients =
      new java.util.concurrent.ConcurrentHashMap<>();

  private final java.util.concurrent.ConcurrentHashMap<Duration, OkHttpClient> wholeClients =
      new java.util.concurrent.ConcurrentHashMap<>();

  /** Parsed request URLs (endpoint base + path), bounded by {@value #MAX_URLS}. */
  private final java.util.concurrent.ConcurrentHashMap<String, okhttp3.HttpUrl> urls =
      new java.util.concurrent.ConcurrentHashMap<>();

  private static final int MAX_DERIVED = 64;
  private static final int MAX_URLS = 4096;
  private final ExecutorService readers;
  private final int chunkSize;
  private final AtomicInteger openResponses = new AtomicInteger();

  private OkHttpTransport(Builder b) {
    Dispatcher dispatcher =
        new Dispatcher(Executors.newCachedThreadPool(daemonThreads("kvroute-http-dispatcher-")));
    dispatcher.setMaxRequests(b.maxRequests);
    dispatcher.setMaxRequestsPerHost(b.maxRequests);
    OkHttpClient.Builder cb =
        new OkHttpClient.Builder()
            .dispatcher(dispatcher)
            .connectionPool(
                new ConnectionPool(
                    b.maxIdleConnections, b.keepAlive.toMillis(), TimeUnit.MILLISECONDS))
            .connectTimeout(b.connectTimeout)
            .readTimeout(Duration.ZERO)
            .writeTimeout(b.connectTimeout.multipliedBy(2))
            .followRedirects(false)
            .followSslRedirects(false)
            .retryOnConnectionFailure(false);
    if (b.trustManager != null) {
      try {
        SSLContext ctx = SSLContext.getInstance("TLS");
        ctx.init(null, new TrustManager[] {b.trustManager}, null);
        cb.sslSocketFactory(ctx.getSocketFactory(), b.trustManager);
      } catch (GeneralSecurityException e) {
        throw new IllegalStateException("cannot set up TLS", e);
      }
      if (b.insecure) {
        cb.hostnameVerifier((host, session) -> true);
      }
    }
    this.client = cb.build();
    this.readers = Executors.newCachedThreadPool(daemonThreads("kvroute-http-reader-"));
    this.chunkSize = b.chunkSize;
  }

  /** A transport with default settings. */
  public static OkHttpTransport create() {
    return builder().build();
  }

  /** A builder. */
  public static Builder builder() {
    return new Builder();
  }

  private static ThreadFactory daemonThreads(String prefix) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  private okhttp3.HttpUrl url(String url) {
    okhttp3.HttpUrl u = urls.get(url);
    if (u == null) {
      u = okhttp3.HttpUrl.get(url);
      if (urls.size() < MAX_URLS) {
        urls.put(url, u);
      }
    }
    return u;
  }

  private OkHttpClient clientFor(boolean streaming, Duration timeout) {
    java.util.concurrent.ConcurrentHashMap<Duration, OkHttpClient> cache =
        streaming ? streamingClients : wholeClients;
    OkHttpClient c = cache.get(timeout);
    if (c == null) {
      c =
          streaming
              ? client.newBuilder().readTimeout(timeout).build()
              : client.newBuilder().callTimeout(timeout).readTimeout(timeout).build();
      if (cache.size() < MAX_DERIVED) {
        OkHttpClient prior = cache.putIfAbsent(timeout, c);
        if (prior != null) {
          c = prior;
        }
      }
    }
    return c;
  }

  /** The request's body, written from its own bytes (not copied per call or per retry). */
  private static RequestBody body(Outbound out) {
    long length = out.bodyLength();
    return new RequestBody() {
      @Override
      public MediaType contentType() {
        return JSON;
      }

      @Override
      public long contentLength() {
        return length;
      }

      @Override
      public void writeTo(okio.BufferedSink sink) throws java.io.IOException {
        sink.write(out.bodyBuffer());
      }
    };
  }

  @Override
  public CompletableFuture<StreamingResponse> send(Outbound out) {
    Request.Builder rb = new Request.Builder().url(url(out.url()));
    if (out.method() == Method.POST) {
      rb.post(body(out));
    } else {
      rb.get();
    }
    out.forEachForwardedHeader(rb::addHeader);
    if (out.streaming()) {
      rb.header("Accept", "text/event-stream, application/json");
    }
    OkHttpClient c = clientFor(out.streaming(), out.timeout());
    Call call = c.newCall(rb.build());
    CompletableFuture<StreamingResponse> future = new CompletableFuture<>();
    future.whenComplete(
        (r, t) -> {
          if (future.isCancelled()) {
            call.cancel();
          }
        });
    call.enqueue(
        new Callback() {
          @Override
          public void onFailure(Call call, IOException e) {
            future.completeExceptionally(failure(out, e, call.isCanceled()));
          }

          @Override
          public void onResponse(Call call, Response response) {
            StreamingResponse r = new OkHttpStreamingResponse(out, call, response);
            if (!future.complete(r)) {
              r.cancel();
            }
          }
        });
    return future;
  }

  static UpstreamException failure(Outbound out, IOException e, boolean cancelled) {
    UpstreamException.Kind kind;
    String what;
    if (e instanceof SocketTimeoutException
        || (e instanceof InterruptedIOException && "timeout".equals(e.getMessage()))) {
      kind = UpstreamException.Kind.TIMEOUT;
      what = "timed out after " + out.timeout().toMillis() + " ms";
    } else if (cancelled) {
      kind = UpstreamException.Kind.CANCELLED;
      what = "cancelled";
    } else {
      kind = UpstreamException.Kind.IO;
      what = "failed: " + e;
    }
    return UpstreamException.transport(out, kind, what, e);
  }

  /**
   * Responses whose body is still open (not fully read, cancelled or closed). It returns to zero
   * when every caller has finished or cancelled; a number that only grows means leaked streams.
   */
  public int openResponses() {
    return openResponses.get();
  }

  /** Calls in flight that have not yet received their response head. */
  public int callsAwaitingHead() {
    return client.dispatcher().runningCallsCount() + client.dispatcher().queuedCallsCount();
  }

  @Override
  public void close() {
    client.dispatcher().cancelAll();
    client.dispatcher().executorService().shutdown();
    client.connectionPool().evictAll();
    readers.shutdown();
  }

  /**
   * A response whose body is read on a reader thread as the subscriber asks for it: the reader is
   * the upstream of a {@link FlowRelay}, which does the demand and cancellation plumbing.
   */
  final class OkHttpStreamingResponse implements StreamingResponse {
    private final Outbound out;
    private final Call call;
    private final Response response;
    private final Map<String, List<String>> headers;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final FlowRelay<ByteBuffer> relay =
        FlowRelay.create(t -> finished(t instanceof CancellationException));

    OkHttpStreamingResponse(Outbound out, Call call, Response response) {
      this.out = out;
      this.call = call;
      this.response = response;
      openResponses.incrementAndGet();
      Map<String, List<String>> h = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
      Headers hs = response.headers();
      for (String name : hs.names()) {
        h.put(name, List.copyOf(hs.values(name)));
      }
      this.headers = java.util.Collections.unmodifiableMap(h);
      relay.onSubscribe(new BodyReader());
    }

    @Override
    public int status() {
      return response.code();
    }

    @Override
    public Map<String, List<String>> headers() {
      return headers;
    }

    @Override
    public void cancel() {
      relay.cancel();
    }

    /**
     * Releases the response once: the body was read to its end or failed ({@code cancel} false: the
     * connection may go back to the pool), or the caller cancelled (the call is cancelled too).
     */
    private void finished(boolean cancel) {
      if (closed.compareAndSet(false, true)) {
        openResponses.decrementAndGet();
        if (cancel) {
          call.cancel();
        }
        try {
          response.close();
        } catch (RuntimeException e) {
          // Closing while the reader thread is inside read() can throw in okio ("Unbalanced
          // enter/exit"); the call is cancelled, the reader ends on its own.
        }
      }
    }

    @Override
    public void subscribe(Flow.Subscriber<? super ByteBuffer> s) {
      relay.subscribe(s);
    }

    /** Reads the body on a reader thread, one chunk per unit of demand. */
    private final class BodyReader implements Flow.Subscription, Runnable {
      private final Object lock = new Object();
      private long demand;
      private boolean cancelled;
      private boolean started;

      @Override
      public void request(long n) {
        boolean startNow;
        synchronized (lock) {
          if (cancelled) {
            return;
          }
          demand = demand + n < 0 ? Long.MAX_VALUE : demand + n;
          lock.notifyAll();
          startNow = !started;
          started = true;
        }
        if (startNow) {
          try {
            readers.execute(this);
          } catch (java.util.concurrent.RejectedExecutionException e) {
            relay.onError(new IllegalStateException("transport is closed", e));
          }
        }
      }

      @Override
      public void cancel() {
        synchronized (lock) {
          cancelled = true;
          lock.notifyAll();
        }
        finished(true);
      }

      @Override
      public void run() {
        ResponseBody body = response.body();
        try (InputStream in = body.byteStream()) {
          byte[] buf = new byte[chunkSize];
          while (true) {
            synchronized (lock) {
              while (demand == 0 && !cancelled) {
                lock.wait();
              }
              if (cancelled) {
                return;
              }
            }
            int n = in.read(buf);
            if (n < 0) {
              break;
            }
            if (n == 0) {
              continue;
            }
            byte[] chunk = new byte[n];
            System.arraycopy(buf, 0, chunk, 0, n);
            synchronized (lock) {
              if (cancelled) {
                return;
              }
              if (demand != Long.MAX_VALUE) {
                demand--;
              }
            }
            relay.onNext(ByteBuffer.wrap(chunk).asReadOnlyBuffer());
          }
          relay.onComplete();
        } catch (IOException e) {
          boolean wasCancelled;
          synchronized (lock) {
            wasCancelled = cancelled;
          }
          if (!wasCancelled) {
            relay.onError(failure(out, e, call.isCanceled()));
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          relay.cancel();
        } finally {
          finished(false);
        }
      }
    }
  }

  /** Builds an {@link OkHttpTransport}; not thread-safe. */
  public static final class Builder {
    private Duration connectTimeout = Duration.ofSeconds(5);
    private int maxRequests = 1024;
    private int maxIdleConnections = 64;
    private Duration keepAlive = Duration.ofMinutes(5);
    private int chunkSize = 16 * 1024;
    private X509TrustManager trustManager;
    private boolean insecure;

    private Builder() {}

    /** TCP (and TLS) connect timeout (default 5 s). */
    public Builder connectTimeout(Duration d) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException("connectTimeout must be > 0, was " + d);
      }
      this.connectTimeout = d;
      return this;
    }

    /** The most concurrent upstream requests, in total and per host (default 1024). */
    public Builder maxRequests(int n) {
      if (n < 1) {
        throw new IllegalArgumentException("maxRequests must be >= 1, was " + n);
      }
      this.maxRequests = n;
      return this;
    }

    /** Idle connections kept per pool (default 64) and how long (default 5 min). */
    public Builder connectionPool(int maxIdle, Duration keepAlive) {
      if (maxIdle < 0) {
        throw new IllegalArgumentException("maxIdleConnections must be >= 0, was " + maxIdle);
      }
      this.maxIdleConnections = maxIdle;
      this.keepAlive = Objects.requireNonNull(keepAlive, "keepAlive");
      return this;
    }

    /** The largest chunk handed to a subscriber (default 16 KiB). */
    public Builder chunkSize(int bytes) {
      if (bytes < 64) {
        throw new IllegalArgumentException("chunkSize must be >= 64, was " + bytes);
      }
      this.chunkSize = bytes;
      return this;
    }

    /** Trusts the certificates in {@code trustStore} for {@code https} endpoints. */
    public Builder trustStore(KeyStore trustStore) {
      try {
        TrustManagerFactory tmf =
            TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trustStore);
        for (TrustManager tm : tmf.getTrustManagers()) {
          if (tm instanceof X509TrustManager x509) {
            this.trustManager = x509;
            return this;
          }
        }
        throw new IllegalArgumentException("trust store yields no X509TrustManager");
      } catch (GeneralSecurityException e) {
        throw new IllegalArgumentException("unusable trust store: " + e.getMessage(), e);
      }
    }

    /**
     * Skips certificate and host name verification. For tests against self-signed servers only:
     * never in production.
     */
    public Builder insecureSkipVerifyForTestsOnly() {
      this.insecure = true;
      this.trustManager =
          new X509TrustManager() {
            @Override
            public void checkClientTrusted(X509Certificate[] chain, String authType) {}

            @Override
            public void checkServerTrusted(X509Certificate[] chain, String authType) {}

            @Override
            public X509Certificate[] getAcceptedIssuers() {
              return new X509Certificate[0];
            }
          };
      return this;
    }

    /** The transport. */
    public OkHttpTransport build() {
      return new OkHttpTransport(this);
    }
  }
}
