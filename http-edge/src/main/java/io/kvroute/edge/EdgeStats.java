package io.kvroute.edge;

/**
 * A snapshot of a server's state, for diagnostics and tests (like nginx's stub_status). The
 * per-phase counts are of the traffic listener's connections.
 *
 * @param connections open connections on the traffic listener
 * @param adminConnections open connections on the admin listener
 * @param reading connections receiving a request's head or body
 * @param handling connections whose request is being handled or answered
 * @param waiting keep-alive connections between requests (and new ones that sent nothing yet)
 * @param stalledWrites connections whose client does not read what is written to it
 * @param bufferedBodyBytes bytes of request bodies buffered now (arrays held by requests that are
 *     being received or handled)
 * @param peakBufferedBodyBytes the most {@code bufferedBodyBytes} has been since the server started
 * @param pausedForMemory connections whose reading is paused until buffered body memory is freed
 * @param halfClosed connections whose client shut its sending side down (a TCP half-close) and that
 *     are still answering what it sent
 */
public record EdgeStats(
    int connections,
    int adminConnections,
    int reading,
    int handling,
    int waiting,
    int stalledWrites,
    long bufferedBodyBytes,
    long peakBufferedBodyBytes,
    int pausedForMemory,
    int halfClosed) {}
