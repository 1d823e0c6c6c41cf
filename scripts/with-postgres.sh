#!/usr/bin/env bash
# Runs a command with a fresh PostgreSQL cluster on 127.0.0.1 (scripts/pg-cluster.sh), described by
# LOGINKIT_TEST_POSTGRES_URL; the cluster is removed in all cases. Tests that stop and restart a
# database make their own cluster with the script named by LOGINKIT_TEST_PG_CLUSTER.
set -euo pipefail
cd "$(dirname "$0")/.."
read -r dir port < <(scripts/pg-cluster.sh create)
cleanup() { scripts/pg-cluster.sh destroy "$dir"; }
trap cleanup EXIT INT TERM
export LOGINKIT_TEST_POSTGRES_URL="postgres://loginkit@127.0.0.1:$port/postgres"
export LOGINKIT_TEST_POSTGRES_CA="$dir/tls/ca.pem"  # the CA of the cluster's certificate (name: localhost)
export LOGINKIT_TEST_PG_CLUSTER="$PWD/scripts/pg-cluster.sh"
"$@"
