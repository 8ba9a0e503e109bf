import assert from "node:assert/strict";
import { once } from "node:events";
import { connect, createServer, type Socket } from "node:net";
import { test } from "node:test";
import { clientErrorStatus } from "../src/server/server.js";

/**
 * The error a server-side socket reports when its client has gone: `leave` acts on the client's
 * end of a real loopback connection, then the server writes until a write fails (the first write
 * after the client's FIN draws its kernel's RST; the next fails as Linux reports a reset in
 * CLOSE_WAIT: EPIPE).
 */
async function serverSideError(leave: (client: Socket) => void): Promise<NodeJS.ErrnoException> {
  const server = createServer({ allowHalfOpen: true });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  try {
    const client = connect(port, "127.0.0.1");
    const [peer] = (await once(server, "connection")) as [Socket];
    const failed = new Promise<NodeJS.ErrnoException>((resolve) => peer.once("error", resolve));
    peer.on("data", () => {});
    await once(client, "connect");
    leave(client);
    await once(client, "close");
    for (let i = 0; i < 100; i++) {
      const e = await Promise.race([failed, new Promise<undefined>((r) => peer.write("x", () => setTimeout(() => r(undefined), 10)))]);
      if (e) return e;
    }
    throw new Error("no write failed");
  } finally {
    server.close();
  }
}

test("a connection error meaning the client went away (reset, EPIPE, timeout, unreachable) is a 499, not a malformed request's 400; node's own codes keep theirs", async () => {
  // real errors of a real socket: a reset (RST) and a close (FIN) before the server's answer
  const reset = await serverSideError((c) => c.resetAndDestroy());
  assert.equal(reset.code, "ECONNRESET");
  const closed = await serverSideError((c) => { c.end(); c.destroy(); });
  assert.equal(closed.code, "EPIPE");
  for (const e of [reset, closed]) assert.equal(clientErrorStatus(e), 499, String(e.code));
  // the codes node's socket errors carry that mean the peer went away (libuv's errno names)
  for (const code of ["EPIPE", "ETIMEDOUT", "ECONNABORTED", "EHOSTUNREACH", "ENETUNREACH", "HPE_INVALID_EOF_STATE"]) assert.equal(clientErrorStatus({ code }), 499, code);
  // node's answers to a connection it gives up on (its own clientError default: 400, 431 for HPE_HEADER_OVERFLOW)
  assert.equal(clientErrorStatus({ code: "ERR_HTTP_REQUEST_TIMEOUT" }), 408);
  assert.equal(clientErrorStatus({ code: "HPE_HEADER_OVERFLOW" }), 431);
  assert.equal(clientErrorStatus({ code: "HPE_CHUNK_EXTENSIONS_OVERFLOW" }), 413);
  assert.equal(clientErrorStatus({ code: "HPE_INVALID_METHOD" }), 400);
});
