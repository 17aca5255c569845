#!/usr/bin/env node
// The VM tests' standalone stop action, as the collector runs it (stopCommand argv):
//   node test/vm/qmp-powerdown.mjs /path/to/{name}.stop.qmp
// Presses the VM's ACPI power button through QEMU's QMP socket (system_powerdown), the way
// `virsh shutdown` does, and exits 0 once QEMU accepted it; 1 with a message otherwise.
// Plain JavaScript so the collector can run it with node, without a TypeScript loader.
import net from "node:net";

const socketPath = process.argv[2];
if (!socketPath || process.argv.length !== 3) {
  console.error("usage: qmp-powerdown.mjs QMP_SOCKET");
  process.exit(2);
}

const timer = setTimeout(() => {
  console.error(`qmp-powerdown: no answer from ${socketPath} within 20 s`);
  process.exit(1);
}, 20_000);

const socket = net.createConnection(socketPath);
socket.setEncoding("utf8");
let buffer = "";
socket.on("data", (chunk) => {
  buffer += chunk;
  const lines = buffer.split("\n");
  buffer = lines.pop() ?? "";
  for (const line of lines) {
    if (line.trim() === "") continue;
    const message = JSON.parse(line);
    if (message.QMP) socket.write(`${JSON.stringify({ execute: "qmp_capabilities", id: "caps" })}\n`);
    else if (message.error) {
      console.error(`qmp-powerdown: ${message.error.class}: ${message.error.desc}`);
      process.exit(1);
    } else if (message.id === "caps")
      socket.write(`${JSON.stringify({ execute: "system_powerdown", id: "powerdown" })}\n`);
    else if (message.id === "powerdown") {
      clearTimeout(timer);
      console.log("system_powerdown sent");
      socket.end();
    }
  }
});
socket.on("error", (error) => {
  console.error(`qmp-powerdown: ${socketPath}: ${error.message}`);
  process.exit(1);
});
