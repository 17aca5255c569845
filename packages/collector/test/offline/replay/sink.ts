// A writable that keeps what the command printed, for replay command tests.
import { Writable } from "node:stream";

export function sink(): Writable & { text: string } {
  const stream = new Writable({
    write(chunk, _encoding, done) {
      stream.text += String(chunk);
      done();
    },
  }) as Writable & { text: string };
  stream.text = "";
  return stream;
}
