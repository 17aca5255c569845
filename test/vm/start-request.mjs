#!/usr/bin/env node
// The collector's start command in test:vm (standalone.startCommand): it asks the harness to boot
// the guest, as a site's `virsh start {name}` asks libvirt. Appends the time of the request to the
// file the harness watches (test/vm/vm.test.ts boots the guest when it appears).
import { appendFileSync } from "node:fs";

const file = process.argv[2];
if (!file) {
  console.error("usage: start-request.mjs FILE");
  process.exit(2);
}
appendFileSync(file, `${Date.now()}\n`);
console.log(`start requested (${file})`);
