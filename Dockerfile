# The retry broker's image: the static binary, CA certificates and a
# non-root user (65532), nothing else. Build anywhere:
#
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg REVISION=$(git rev-parse HEAD) -t retrybroker .
#
# `make image` builds the same image without pulling a base image
# (deploy/image/Dockerfile.prebuilt, from files built on the host).
ARG GO_VERSION=1.26
FROM golang:${GO_VERSION} AS build
ARG VERSION=dev
ARG REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" \
      -o /rootfs/broker ./cmd/broker \
 && mkdir -p /rootfs/etc/ssl/certs \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
 && echo 'nonroot:x:65532:65532:nonroot:/:/sbin/nologin' > /rootfs/etc/passwd \
 && echo 'nonroot:x:65532:' > /rootfs/etc/group

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="retrybroker" \
      org.opencontainers.image.description="Retry broker: outbound HTTP calls retried by tenant policy and provider rate-limit hints" \
      org.opencontainers.image.source="https://github.com/retrybroker/retrybroker" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /rootfs/ /
USER 65532:65532
EXPOSE 50051 9090
ENTRYPOINT ["/broker"]
