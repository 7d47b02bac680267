# syntax=docker/dockerfile:1
# The muster image: `muster run` (ENTRYPOINT /muster, CMD run) on distroless, as user nonroot.
#   docker build -t ghcr.io/muster-sched/muster:0.1.0 .
# (ghcr.io/muster-sched is a placeholder registry: tag and push to your own.)

FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY . .
# The caches keep the registry and the target directory between builds (BuildKit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p muster \
 && cp target/release/muster /muster

# glibc and libgcc (mimalloc and the Rust runtime need them), no shell, user 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /muster /muster
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["/muster"]
CMD ["run"]
