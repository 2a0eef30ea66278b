# syntax=docker/dockerfile:1
#
# paymentsd in a container: one static binary that serves the API, runs the
# migrations, creates users and can play the Stripe emulator. The image's
# entrypoint is the binary, so the container's command is its subcommand:
#
#   docker build -t paymentsd .
#   docker run --rm -e DATABASE_URL=... paymentsd migrate
#   docker run --rm -e DATABASE_URL=... -e STRIPE_SECRET_KEY=... \
#     -e PAYMENTSD_ADDR=0.0.0.0:8080 -p 8080:8080 paymentsd serve
#
# See docker-compose.yml for the whole demo.

FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=auto
# Modules first: this layer stays cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags='-s -w' -o /out/paymentsd ./cmd/paymentsd

# distroless/static carries CA certificates (for api.stripe.com) and tzdata,
# and nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/paymentsd /usr/local/bin/paymentsd
USER nonroot:nonroot
# 8080: the API (set PAYMENTSD_ADDR=0.0.0.0:8080 in a container).
# 12111: the Stripe emulator (`stripefake --addr 0.0.0.0:12111`).
EXPOSE 8080 12111
ENTRYPOINT ["paymentsd"]
CMD ["serve"]
