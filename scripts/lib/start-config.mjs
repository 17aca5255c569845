// The collector config `npm start` writes (scripts/start.mjs): a standalone collector with demo
// timeouts in observe mode. In a module of its own so test/start-demo.test.ts resolves the very
// text the demo serves.
//
// The demo judges this machine's users, not the machine: whole-machine CPU and whole-machine disk
// are off, because the browser looking at the status page (headless Chromium opening it is a
// 5 MB/s+ disk burst, a real one more) would cross them and reset the idle clock on every visit,
// and the page would say the machine "would stop … tomorrow". Users' processes count from 1.5
// cores, so a build or a training run (which reads and writes too) still keeps the machine.

/** The YAML text of the demo's collector config. */
export function demoCollectorConfig({ grpcPort, httpPort, keyFile }) {
  return `# Written by npm start: a standalone collector with demo timeouts, observe mode.
# Demo thresholds a person can watch: whole-machine CPU and disk are off (the browser looking at
# the status page would cross them and cancel every pending stop); users' processes count from
# 1.5 cores, so a build or a training run still does. Observe mode warns nobody.
mode: standalone
grpc: { listen: "127.0.0.1:${grpcPort}" }
http: { listen: "127.0.0.1:${httpPort}" }
tokenKeyFile: ${JSON.stringify(keyFile)}
reportInterval: 5s
tick: 1s
policy:
  defaults:
    autostop: enabled
    mode: observe
    idle-timeout: 2m
    grace-period: 1m
    agent-lost-after: 30s
    cpu-busy-threshold: "off"
    disk-threshold: "off"
    user-cpu-threshold: "1.5"
notifications:
  publicUrl: "http://127.0.0.1:${httpPort}"
`;
}
