# syntax=docker/dockerfile:1
#
# paymentsd in a container: one static binary that serves the API, runs the
# migrations and creates users. The image's entrypoint is the binary, so the
# container's command is its subcommand:
#
#   docker build -t paymentsd .
#   docker run --rm -e DATABASE_URL=... paymentsd migrate
#   docker run --rm -e DATABASE_URL=... -e STRIPE_SECRET_KEY=... \
#     -e PAYMENTSD_ADDR=0.0.0.0:8080 -p 8080:8080 paymentsd serve
#
# The Stripe emulator of the demo is an image of its own, the stripefake
# target, built from the emulator/ module: the paymentsd image carries none
# of the tooling.
#
#   docker build --target stripefake -t stripefake .
#   docker run --rm -p 127.0.0.1:12111:12111 stripefake
#
# See docker-compose.yml for the whole demo.

FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=auto
# Modules first: this layer stays cached until a go.mod or go.sum changes.
# The product's go.mod names the emulator's module (its tests use it), so
# the emulator's go.mod comes too.
COPY go.mod go.sum ./
COPY emulator/go.mod emulator/go.sum ./emulator/
RUN --mount=type=cache,target=/go/pkg/mod go mod download && go -C emulator mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags='-s -w' -o /out/paymentsd ./cmd/paymentsd

FROM build AS build-stripefake
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go -C emulator build -trimpath -ldflags='-s -w' -o /out/stripefake ./cmd/stripefake

# distroless/static carries CA certificates (for api.stripe.com) and tzdata,
# and nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot AS stripefake
COPY --from=build-stripefake /out/stripefake /usr/local/bin/stripefake
USER nonroot:nonroot
# The admin endpoints under /_fake/ have no authentication: publish the
# port on loopback only.
EXPOSE 12111
ENTRYPOINT ["stripefake"]
CMD ["--addr", "0.0.0.0:12111"]

# The default target, last: the product alone.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/paymentsd /usr/local/bin/paymentsd
USER nonroot:nonroot
# 8080: the API (set PAYMENTSD_ADDR=0.0.0.0:8080 in a container).
EXPOSE 8080
ENTRYPOINT ["paymentsd"]
CMD ["serve"]
