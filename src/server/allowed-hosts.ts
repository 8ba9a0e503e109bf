import { isIP } from "node:net";
import { hostname } from "node:os";

/**
 * The guard against DNS rebinding. A page on an attacker's domain that re-points the domain at
 * 127.0.0.1 is, to the browser, of the same origin as a server on this machine: neither CORS nor
 * the foreign-origin check stops it, and it can read every answer (GET /slots with the prompts
 * running, /props, generations) of a server without an API key. Its requests still carry the
 * attacker's domain in Host, the one thing the page cannot change; so a server bound to loopback
 * answers only a Host that is a loopback name, an IP address (a literal cannot be re-pointed), the
 * name it was bound by, this machine's own name, or one the operator listed (a reverse proxy's
 * public name). Ollama guards a loopback-bound server the same way (allowedHostsMiddleware: 403 for
 * other names, its own list a little longer: *.local, *.internal); one bound to every interface is
 * reached by whatever names its network gives it, so, as Ollama's, it is not checked unless the
 * operator lists the names.
 */

/** allowedHosts entry that turns the check off (every Host answered) */
export const ANY_HOST = "*";
/** a host name as it may be listed: labels of letters, digits, "-" and "_", a leading "." for the domain and every name under it */
const HOST_NAME = /^\.?[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?$/i;

/** the problem with an allowedHosts list, in the words of `setting` (undefined: none) */
export function allowedHostsProblem(hosts: readonly string[], setting: string): string | undefined {
  if (hosts.length === 0) return `${setting} names no host: give one or more names, comma-separated (e.g. llm.example.com), or "*" for any`;
  for (const host of hosts) {
    if (host === ANY_HOST || HOST_NAME.test(host) || isIP(host.replace(/^\[(.*)\]$/, "$1")) !== 0) continue;
    const hint = /^[^:]+:\d+$/.test(host) ? ": name the host without its port (every port is answered)" : ": expected a host name such as llm.example.com, .example.com for every name under it, or \"*\" for any";
    return `${setting}: ${JSON.stringify(host)} is not a host name${hint}`;
  }
  return undefined;
}

/** whether an address the server listens on is a loopback one (127.0.0.0/8, ::1, ::ffff:127.x.x.x) */
export function isLoopbackAddress(address: string): boolean {
  return /^(::ffff:)?127\.\d+\.\d+\.\d+$/i.test(address) || address === "::1";
}

/** a Host header's name: its port and an IPv6 literal's brackets dropped, lower case, no trailing dot (undefined: not a host) */
function hostName(host: string): string | undefined {
  try {
    // (the WHATWG parse a browser made of the URL it sent this request to: an IPv4 address
    // spelled as 0x7f.1 is 127.0.0.1, upper case is lower)
    const name = new URL(`http://${host}`).hostname;
    return name.replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "");
  } catch {
    return undefined;
  }
}

/**
 * The Host headers a server answers, or undefined where every one is: `boundHost` is the host it
 * was asked to listen on (a name such as localhost or an address), `boundAddress` the address it
 * listens on, `allowed` the operator's names (ServeOptions.allowedHosts)
 */
export function hostGuard(boundHost: string, boundAddress: string, allowed: readonly string[] | undefined): ((host: string) => boolean) | undefined {
  if (allowed?.includes(ANY_HOST) || (allowed === undefined && !isLoopbackAddress(boundAddress))) return undefined;
  const own = [hostName(boundHost), hostName(hostname())];
  const names = (allowed ?? []).map((h) => h.toLowerCase().replace(/\.$/, ""));
  return (host) => {
    const name = hostName(host);
    if (name === undefined) return false;
    // localhost and its subdomains resolve to loopback in browsers whatever DNS says (RFC 6761, 6.3)
    if (isIP(name) !== 0 || name === "localhost" || name.endsWith(".localhost") || own.includes(name)) return true;
    return names.some((n) => (n.startsWith(".") ? name === n.slice(1) || name.endsWith(n) : name === n));
  };
}
