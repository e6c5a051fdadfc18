#!/usr/bin/env bash
# A self-signed TLS pair for local use: OUT/server.pem (certificate, also the
# CA that clients trust) and OUT/server.key, valid for localhost, 127.0.0.1
# and ::1. Never use it beyond your own machine; in a cluster the certificate
# comes from a Secret (see docs/simulator-api.md).
set -euo pipefail
out="${1:-var/certs}"
days="${DAYS:-825}"
mkdir -p "$out"
if [[ -s "$out/server.pem" && -s "$out/server.key" ]]; then
  echo "$out/server.pem exists (delete it to make a new pair)"
  exit 0
fi
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" \
  -subj "/CN=localhost/O=lawlab local" \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" \
  -addext "basicConstraints=critical,CA:TRUE" \
  -keyout "$out/server.key" -out "$out/server.pem" 2>/dev/null
chmod 644 "$out/server.pem"
echo "wrote $out/server.pem (certificate; clients pass it as --ca) and $out/server.key"
