package io.kvroute.edge;

/**
 * A snapshot of a server's state, for tests and diagnostics.
 *
 * @param connections open connections on the traffic listener
 * @param adminConnections open connections on the admin listener
 * @param bufferedBodyBytes bytes of request bodies buffered now (arrays held by requests that are
 *     being received or handled)
 * @param peakBufferedBodyBytes the most {@code bufferedBodyBytes} has been since the server started
 * @param pausedForMemory connections whose reading is paused until buffered body memory is freed
 */
public record EdgeStats(
    int connections,
    int adminConnections,
    long bufferedBodyBytes,
    long peakBufferedBodyBytes,
    int pausedForMemory) {}
