/**
 * The services other signals already read, by process: the remote-sessions signal judges a
 * port forward by what it reaches, and a forward to one of these is that service's client.
 * The jupyter signal publishes what its discovery found; nothing here walks a home again.
 */
export interface WatchedProcess {
  service: "jupyter" | "code-server";
  pid: number;
  /** How the service's own signal names it (a Jupyter server's URL), for the Report's reader. */
  url: string;
}

export interface WatchedServices {
  publishJupyter(servers: ReadonlyArray<{ pid: number; url: string }>): void;
  jupyter(): readonly WatchedProcess[];
}

export function createWatchedServices(): WatchedServices {
  let jupyter: WatchedProcess[] = [];
  return {
    publishJupyter(servers) {
      jupyter = servers
        .filter((server) => server.pid > 0)
        .map((server) => ({ service: "jupyter", pid: server.pid, url: server.url }));
    },
    jupyter: () => jupyter,
  };
}
