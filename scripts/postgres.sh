#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests (Debian's package; installed with apt when missing).
#   scripts/postgres.sh start DIR   -> initdb in DIR (owned by the `postgres` user when run as root), start
#                                      on a free port with the socket in DIR, create the role and database,
#                                      print the storage URL (postgresql://tradesim:PASSWORD@127.0.0.1:PORT/tradesim)
#                                      The server speaks TLS (ssl=on) as well as plain TCP, with a certificate
#                                      made now: DIR/tls/ca.crt signed DIR/tls/server.crt, valid for the host
#                                      name `localhost` only (not for 127.0.0.1); DIR/tls/other-ca.crt is a CA
#                                      that signed nothing (the TLS tests' wrong root).
#   scripts/postgres.sh stop DIR    -> stop it and remove DIR
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?data directory}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
as_owner() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
case "$cmd" in
start)
  if [ -z "$bin" ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo -n"
    $sudo apt-get install -y -q postgresql >/dev/null 2>&1 || { echo "cannot install postgresql" >&2; exit 1; }
    bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
  password=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust >/dev/null
  # The test certificates (EC P-256, valid two days): a CA, the server's certificate for `localhost`, and a
  # second CA that signed nothing.
  if ! command -v openssl >/dev/null; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo -n"
    { $sudo apt-get update -q && $sudo apt-get install -y -q openssl; } >/dev/null 2>&1 || {
      echo "cannot install openssl (the TLS tests' certificates need it)" >&2
      exit 1
    }
  fi
  tls="$dir/tls"
  mkdir -p "$tls"
  chmod 755 "$tls"
  # openssl's chatter goes to a log, shown when a step fails.
  ssl() { openssl "$@" 2>"$tls/openssl.log" || { cat "$tls/openssl.log" >&2; exit 1; }; }
  ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  for ca in ca other-ca; do
    ssl req -x509 "${ec[@]}" -keyout "$tls/$ca.key" -out "$tls/$ca.crt" -days 2 -subj "/CN=tradesim test $ca" \
      -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
  done
  ssl req "${ec[@]}" -keyout "$tls/server.key" -out "$tls/server.csr" -subj "/CN=localhost"
  printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' \
    >"$tls/server.ext"
  ssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial -days 2 \
    -extfile "$tls/server.ext" -out "$tls/server.crt"
  rm -f "$tls/ca.key" "$tls/other-ca.key" "$tls/server.csr" "$tls/ca.srl" "$tls/openssl.log"
  chmod 644 "$tls"/*.crt
  chmod 600 "$tls/server.key"
  [ "$(id -u)" -eq 0 ] && chown postgres "$tls/server.key"
  echo "host all all 127.0.0.1/32 scram-sha-256" >"$dir/hba"
  echo "local all all trust" >>"$dir/hba"
  as_owner cp "$dir/hba" "$dir/data/pg_hba.conf"
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/log" -w \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off \
       -c ssl=on -c ssl_cert_file=$tls/server.crt -c ssl_key_file=$tls/server.key" start >/dev/null
  as_owner "$bin/psql" -h "$dir" -p "$port" -U postgres -q -v ON_ERROR_STOP=1 \
    -c "CREATE ROLE tradesim LOGIN PASSWORD '$password'" -c "CREATE DATABASE tradesim OWNER tradesim" >/dev/null
  echo "$port" >"$dir/port"
  echo "postgresql://tradesim:$password@127.0.0.1:$port/tradesim"
  ;;
stop)
  if [ -n "$bin" ] && [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
  ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
