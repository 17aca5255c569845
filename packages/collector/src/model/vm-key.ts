// A VM's identity: the one type every layer names a VM by (agents, fleet, kube, web, notify).
export interface VmKey {
  namespace: string;
  name: string;
}

export const vmId = (vm: VmKey) => `${vm.namespace}/${vm.name}`;
