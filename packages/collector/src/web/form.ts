// Reading a urlencoded form body with a hard size cap: shared by the router (keep links, the
// starting page) and the start-address page, so it lives below both.
import type http from "node:http";

/** A keep-link form is a few hundred bytes; anything larger is not one. */
export const MAX_FORM_BYTES = 4096;
/** After a 413, the rest of an oversized body is read and dropped up to this much, then the connection is cut. */
const MAX_DISCARDED_BYTES = 1 << 20;

export type Form = { ok: true; form: URLSearchParams } | { ok: false; status: 400 | 413 };

/** Reads a urlencoded form of at most MAX_FORM_BYTES; a larger one is a 413, never a reset. */
export function readForm(req: http.IncomingMessage): Promise<Form> {
  return new Promise((resolve) => {
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > MAX_FORM_BYTES) {
      discardRest(req);
      return resolve({ ok: false, status: 413 });
    }
    let size = 0;
    const chunks: Buffer[] = [];
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_FORM_BYTES) return void chunks.push(chunk);
      req.off("data", onData);
      discardRest(req);
      resolve({ ok: false, status: 413 });
    };
    req.on("data", onData);
    req.on("end", () => resolve({ ok: true, form: new URLSearchParams(Buffer.concat(chunks).toString("utf8")) }));
    req.on("error", () => resolve({ ok: false, status: 400 }));
  });
}

/** Lets the client finish sending (so it reads the answer) but not forever: cut after MAX_DISCARDED_BYTES. */
function discardRest(req: http.IncomingMessage): void {
  let discarded = 0;
  req.on("data", (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > MAX_DISCARDED_BYTES) req.socket.destroy();
  });
  req.resume();
}
