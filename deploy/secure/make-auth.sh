#!/bin/sh
# Makes the secrets of the secure example: a new random token per principal of
# auth.toml.template (32 bytes from openssl's CSPRNG, in hex, like
# `muster auth hash-token --generate`), secrets/auth.toml holding only their SHA-256, and .env
# holding the tokens themselves for docker compose. Nothing existing is overwritten.
#
# Usage (in deploy/secure): ./make-auth.sh
set -eu
cd "$(dirname "$0")"

if [ -e secrets/auth.toml ] || [ -e .env ]; then
    echo "secrets/auth.toml or .env exists already; delete both to make new tokens" >&2
    exit 1
fi
umask 077
mkdir -p secrets
auth=$(cat auth.toml.template)
: > .env
for principal in orders-service monitoring ops; do
    token=$(openssl rand -hex 32)
    # The hash of the token's bytes, as musterd computes it (no trailing newline).
    sha=$(printf '%s' "$token" | openssl dgst -sha256 -r | cut -d' ' -f1)
    var=$(echo "$principal" | tr 'a-z-' 'A-Z_')
    auth=$(printf '%s\n' "$auth" | sed "s/@${var}_SHA256@/$sha/")
    echo "${var}_TOKEN=$token" >> .env
done
printf '%s\n' "$auth" > secrets/auth.toml
# musterd runs as uid 10001 in the container and must read the file.
chmod 755 secrets
chmod 644 secrets/auth.toml
echo "wrote secrets/auth.toml (hashes) and .env (tokens: keep it secret)"
