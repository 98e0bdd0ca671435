#!/usr/bin/env bash
# A throwaway test CA and one leaf certificate for the egress tests, made with openssl.
#
# usage: tests/egress_fixtures/make_ca.sh DIR [NAME...]
#
# Writes into DIR (created if missing):
#   ca.pem        the CA certificate (what a client is given with --cacert / PIP_CERT / cafile)
#   ca.key        its key
#   leaf.pem      a certificate signed by the CA whose subjectAltName lists every NAME as a DNS
#                 name (default: pkgs.test other.test), so a TLS failure in a test is about the
#                 proxy's SNI check, never about the certificate
#   leaf.key      its key (unencrypted, for tests/egress_fixtures/serve.py --tls-cert/--tls-key)
# Both valid for 2 days: nothing here outlives a test run. Exit status: 0 done; 1 openssl failed;
# 2 usage error or openssl missing.
set -euo pipefail

prog=${0##*/}
[[ $# -ge 1 ]] || { echo "usage: $prog DIR [NAME...]" >&2; exit 2; }
command -v openssl > /dev/null || { echo "$prog: openssl is not installed" >&2; exit 2; }
dir=$1
shift
names=("$@")
((${#names[@]})) || names=(pkgs.test other.test)
mkdir -p -- "$dir"
cd -- "$dir"

san=
for n in "${names[@]}"; do
  [[ $n =~ ^[A-Za-z0-9.-]+$ ]] || { echo "$prog: bad DNS name '$n'" >&2; exit 2; }
  san+=${san:+,}DNS:$n
done

key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1)  # P-256: made in milliseconds, unlike RSA
openssl req -x509 "${key[@]}" -nodes -days 2 -subj "/CN=cagent egress test CA" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
  -keyout ca.key -out ca.pem 2> openssl.log
openssl req "${key[@]}" -nodes -subj "/CN=${names[0]}" -keyout leaf.key -out leaf.csr \
  2>> openssl.log
printf '%s\n' "subjectAltName=$san" "basicConstraints=CA:FALSE" \
  "keyUsage=digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" > leaf.ext
openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
  -extfile leaf.ext -out leaf.pem 2>> openssl.log
rm -f leaf.csr leaf.ext ca.srl
chmod 0644 ca.pem leaf.pem leaf.key
