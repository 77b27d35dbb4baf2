#!/bin/sh
# Makes what a TLS-enabled Muster needs, with openssl (docs/security.md, "Walkthrough"):
#
#   ca.pem / ca.key          a private certificate authority (keep ca.key offline)
#   server.pem / server.key  musterd's certificate, for the names in SERVER_NAMES
#   <name>.pem / <name>.key  one client certificate per principal named on the command line,
#                            its subject common name being the principal (for mTLS)
#
# Usage: ./make-certs.sh [OUT_DIR [CLIENT_PRINCIPAL...]]
#   OUT_DIR defaults to ./certs; nothing in it is overwritten (delete it to start again).
#   SERVER_NAMES (default "DNS:musterd,DNS:localhost,IP:127.0.0.1") are the names clients
#   connect by: a client checks the server's certificate against the host of its address
#   (or --tls-server-name).
#   DAYS (default 365) is the certificates' validity; the CA's is ten years.
set -eu

out="${1:-certs}"
[ "$#" -gt 0 ] && shift
server_names="${SERVER_NAMES:-DNS:musterd,DNS:localhost,IP:127.0.0.1}"
days="${DAYS:-365}"

mkdir -p "$out"
cd "$out"

# Private keys readable by their owner only.
umask 077

key() {
    # ECDSA P-256: small, fast, and accepted by rustls.
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
}

# sign NAME CN EXTENSIONS: a certificate for NAME.key signed by the CA.
sign() {
    openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr"
    printf '%s\n' "basicConstraints=critical,CA:FALSE" \
        "keyUsage=critical,digitalSignature" "$3" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
        -days "$days" -sha256 -extfile "$1.ext" -out "$1.pem"
    rm -f "$1.csr" "$1.ext"
}

if [ ! -e ca.pem ]; then
    key ca.key
    openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=muster-ca" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -out ca.pem
fi

if [ ! -e server.pem ]; then
    key server.key
    sign server musterd "subjectAltName=$server_names
extendedKeyUsage=serverAuth"
fi

for principal in "$@"; do
    if [ ! -e "$principal.pem" ]; then
        key "$principal.key"
        sign "$principal" "$principal" "extendedKeyUsage=clientAuth"
    fi
done

# Certificates are public; the server reads its key as another user in a container.
chmod 644 ./*.pem
chmod 644 server.key
openssl verify -x509_strict -CAfile ca.pem ./*.pem | grep -v ': OK$' && exit 1
echo "certificates in $(pwd): ca.pem, server.pem/server.key${*:+, and for $*}"
