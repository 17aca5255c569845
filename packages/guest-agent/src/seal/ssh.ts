/**
 * First-boot SSH host key generation. A sealed image has no host keys; Debian's and Ubuntu's
 * ssh.service does not make them (its ExecStartPre `sshd -t` fails without them), and
 * cloud-init only does when it runs with a datasource. This oneshot unit makes them on any
 * boot that finds none.
 */
export const REGENERATE_UNIT_NAME = "ws-regenerate-ssh-host-keys.service";
export const REGENERATE_UNIT_PATH = `/etc/systemd/system/${REGENERATE_UNIT_NAME}`;
export const REGENERATE_UNIT_WANTED_BY = "multi-user.target";
export const REGENERATE_UNIT_LINK = `/etc/systemd/system/${REGENERATE_UNIT_WANTED_BY}.wants/${REGENERATE_UNIT_NAME}`;

export const REGENERATE_UNIT_TEXT = `# Installed by ws-agent seal: the golden image has no SSH host keys, so every clone
# makes its own on first boot.
[Unit]
Description=Generate the SSH host keys a sealed image lacks (ws-agent seal)
ConditionPathExistsGlob=!/etc/ssh/ssh_host_*_key
After=cloud-init.service
Before=ssh.service sshd.service

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A
RemainAfterExit=yes

[Install]
WantedBy=${REGENERATE_UNIT_WANTED_BY}
`;

/** A unit file that regenerates host keys: it runs `ssh-keygen -A` (Debian, Arch) or sshd-keygen (Fedora). Pure. */
export function unitRegeneratesHostKeys(unitText: string): boolean {
  return unitText
    .split("\n")
    .some((line) => /^\s*ExecStart(Pre)?\s*=/.test(line) && /(ssh-keygen\s+(-\S+\s+)*-A\b|sshd-keygen)/.test(line));
}

/** Host key file names: ssh_host_<type>_key, its .pub and -cert.pub. */
export function isHostKeyFile(name: string): boolean {
  return name.startsWith("ssh_host_");
}
