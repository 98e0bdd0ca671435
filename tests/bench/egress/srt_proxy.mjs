// sandbox-runtime's HTTP proxy alone, for tests/bench/egress_bench.sh: the comparison point.
//
// usage: node tests/bench/egress/srt_proxy.mjs --allow HOST[:PORT]... [--resolve HOST:ADDR]...
//                                              [--listen 127.0.0.1:PORT]
//
// Prints the bound port alone on stdout's first line, then serves until killed. It builds the
// proxy the way sandbox-runtime's own SandboxManager does for a sandboxed command
// (dist/sandbox/sandbox-manager.js, startMuxProxyServer): createHttpProxyServer with an
// allow-list filter (srt's own matchesDomainPatternWithPort) and, as lookupFor, srt's
// resolved-address guard (createResolvedAddressGuard), which refuses a name resolving into
// loopback/private space unless the allow-list names that address: here --resolve's addresses
// are passed to it as allowed IP literals, and its resolver answers --resolve's names (like
// curl's --resolve and cagent's). What is left out: the sandbox around the client (bubblewrap),
// the SOCKS side, TLS termination, credential injection and the Proxy-Authorization token, none
// of which a plain allow-listed CONNECT or HTTP GET uses.
//
// The package (dist/ only, no "exports" map) is pinned in package.json next to this file; install
// it with `npm ci` here. Its package.json asks for node >= 22.12; the parts used here run on
// Debian 12's node 20 (checked: a refused host, an allowed GET and CONNECT).
import dns from 'node:dns';
import { createHttpProxyServer } from '@anthropic-ai/sandbox-runtime/dist/sandbox/http-proxy.js';
import { createResolvedAddressGuard } from '@anthropic-ai/sandbox-runtime/dist/sandbox/resolved-address-guard.js';
import { matchesDomainPatternWithPort } from '@anthropic-ai/sandbox-runtime/dist/sandbox/domain-pattern.js';

const allow = [];
const resolve = new Map();
let listen = '127.0.0.1:0';
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const need = () => {
    if (i + 1 >= args.length) {
      console.error(`srt_proxy.mjs: ${args[i]} needs a value`);
      process.exit(2);
    }
    return args[++i];
  };
  switch (args[i]) {
    case '--allow':
      allow.push(need());
      break;
    case '--resolve': {
      const v = need();
      const at = v.lastIndexOf(':');
      if (at <= 0) {
        console.error(`srt_proxy.mjs: --resolve needs HOST:ADDR, got ${JSON.stringify(v)}`);
        process.exit(2);
      }
      resolve.set(v.slice(0, at).toLowerCase(), v.slice(at + 1));
      break;
    }
    case '--listen':
      listen = need();
      break;
    default:
      console.error(`srt_proxy.mjs: unknown argument ${JSON.stringify(args[i])}`);
      process.exit(2);
  }
}
if (allow.length === 0) {
  console.error('srt_proxy.mjs: at least one --allow HOST[:PORT]');
  process.exit(2);
}
const [listenHost, listenPort] = [listen.slice(0, listen.lastIndexOf(':')),
  Number(listen.slice(listen.lastIndexOf(':') + 1))];
if (!/^127\./.test(listenHost)) {
  console.error('srt_proxy.mjs: --listen must be a 127.x address');
  process.exit(2);
}

const guard = createResolvedAddressGuard({
  allowedDomains: [...allow, ...resolve.values()],
  resolve: (hostname, options, callback) => {
    const addr = resolve.get(String(hostname).toLowerCase());
    if (addr !== undefined) {
      callback(null, [{ address: addr, family: addr.includes(':') ? 6 : 4 }]);
      return;
    }
    dns.lookup(hostname, options, callback);
  },
});

const server = createHttpProxyServer({
  filter: (port, host) => allow.some(pattern => matchesDomainPatternWithPort(host, port, pattern)),
  lookupFor: port => guard.lookupFor(port),
});
server.listen(listenPort, listenHost, () => {
  process.stdout.write(`${server.address().port}\n`);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
