# syntax=docker/dockerfile:1
#
# The archiver's image, for people with Docker. `make image` builds the same
# image without a daemon (archiver/cmd/mkimage, archiver/image); the tests in
# archiver/image check that both declare the same ENTRYPOINT, ENV, USER,
# WORKDIR and labels. Keep them equivalent when you change either.
#
#   docker build -t worldbackup-archiver:dev \
#     --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg CREATED="$(date -u -d @"$(git log -1 --format=%ct)" +%Y-%m-%dT%H:%M:%SZ)" .
#
# The CA bundle comes from the builder's Debian ca-certificates package,
# as `make image` takes it from the build machine's.

ARG GO_VERSION=1.26.8

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS=linux
ARG TARGETARCH
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
      go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -buildid=" \
      -o /rootfs/usr/local/bin/archiver ./archiver/cmd/archiver \
 && mkdir -p /rootfs/etc/ssl/certs /rootfs/root /rootfs/tmp \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt \
 && cp archiver/image/rootfs/etc/passwd archiver/image/rootfs/etc/group /rootfs/etc/ \
 && chmod 0755 /rootfs/usr/local/bin/archiver \
 && chmod 0644 /rootfs/etc/passwd /rootfs/etc/group /rootfs/etc/ssl/certs/ca-certificates.crt \
 && chmod 0700 /rootfs/root \
 && chmod 1777 /rootfs/tmp

FROM scratch
COPY --from=build /rootfs/ /
ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 0
WORKDIR /
ARG VERSION=dev
ARG REVISION=unknown
ARG SOURCE=https://github.com/worldbackup/worldbackup
ARG CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.title="worldbackup-archiver" \
      org.opencontainers.image.description="Streams a Minecraft world into a compressed, checksummed archive and records it in PostgreSQL." \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/usr/local/bin/archiver"]
