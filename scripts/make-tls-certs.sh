#!/bin/bash
# Makes a job's TLS files for `--tls-cert/--tls-key/--tls-ca` (TCP transport): a CA, and one
# certificate and key per name, signed by it (EC P-256, valid DAYS days).
#   scripts/make-tls-certs.sh DIR [--days N] NAME...
# DIR/ca.pem is what every process gets as --tls-ca; DIR/NAME.pem and DIR/NAME.key are the
# certificate and key of NAME (a coordinator, a node, the status command). Keep DIR/ca.key
# offline: whoever holds it can make certificates the job accepts.
set -euo pipefail
if [ $# -lt 2 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
dir=$1
shift
days=30
if [ "${1:-}" = "--days" ]; then
  days=$2
  shift 2
fi
command -v openssl >/dev/null || { echo "make-tls-certs: openssl is not installed (apt-get install openssl)" >&2; exit 1; }
mkdir -p "$dir"
chmod 700 "$dir"
if [ ! -f "$dir/ca.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
    -subj "/CN=sailor job CA" -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
fi
for name in "$@"; do
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -days "$days" -out "$dir/$name.pem" 2>/dev/null
  rm -f "$dir/$name.csr"
  chmod 600 "$dir/$name.key"
done
echo "TLS files in $dir: ca.pem, and for $*: NAME.pem and NAME.key"
