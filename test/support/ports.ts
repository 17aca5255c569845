// Ports for the processes the tests start. A port the kernel hands out for `listen(0)` comes from
// the ephemeral range, the same range every outgoing connection takes its local port from: a port
// chosen that way and handed to a process that binds it later (a replica that joins a rolling
// update minutes after its port was picked) can meanwhile be the local end of some test's HTTP
// request, and the process fails with EADDRINUSE. So ports come from below the ephemeral range,
// where only a listener asking for that number can land, and each vitest worker takes its own
// slice, so two workers never hand out the same number.
import { readFileSync } from "node:fs";
import net from "node:net";

const LOWEST = 15_000;
const SLICES = 16;

function ephemeralLow(): number {
  try {
    const [low] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/);
    const value = Number(low);
    return Number.isInteger(value) && value > 0 ? value : 32_768;
  } catch {
    return 32_768;
  }
}

interface Slice {
  readonly first: number;
  readonly size: number;
  next: number;
}

function sliceOfThisWorker(): Slice | undefined {
  const size = Math.floor((ephemeralLow() - LOWEST) / SLICES);
  if (size < 64) return undefined;
  const worker = Number(process.env["VITEST_POOL_ID"] ?? process.env["VITEST_WORKER_ID"] ?? 0);
  const index = (Number.isInteger(worker) ? worker : 0) % SLICES;
  const first = LOWEST + index * size;
  // A random start, so two runs side by side (npm test beside test:vm) rarely meet.
  return { first, size, next: Math.floor(Math.random() * size) };
}

let slice: Slice | undefined | null = null;

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** A port nothing listens on now and that no outgoing connection will take before it is bound. */
export async function freePort(): Promise<number> {
  if (slice === null) slice = sliceOfThisWorker();
  if (slice === undefined) return kernelPort();
  for (let tried = 0; tried < slice.size; tried++) {
    const port = slice.first + (slice.next % slice.size);
    slice.next += 1;
    if (await canListen(port)) return port;
  }
  return kernelPort();
}
