// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Threadline",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "coord", targets: ["coord"]),
        .executable(name: "worker", targets: ["worker"]),
        .executable(name: "fuzz-pipeline", targets: ["fuzz-pipeline"]),
        .executable(name: "fuzz-wire", targets: ["fuzz-wire"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/x-sheep/swift-property-based", from: "2.0.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // C libraries, each wrapped by exactly one Swift module.
        .systemLibrary(name: "CFFmpeg", path: "Sources/CFFmpeg", pkgConfig: "libavformat",
                       providers: [.apt(["libavformat-dev", "libavcodec-dev", "libavutil-dev",
                                         "libavfilter-dev", "libswscale-dev", "libswresample-dev"])]),
        .systemLibrary(name: "CZeroMQ", path: "Sources/CZeroMQ", pkgConfig: "libzmq",
                       providers: [.apt(["libzmq3-dev"])]),
        // Hashing verifies every reused artifact: keep it optimised even in debug builds.
        .systemLibrary(name: "CHeif", path: "Sources/CHeif", pkgConfig: "libheif", providers: [.apt(["libheif-dev"])]),
        .systemLibrary(name: "CLCMS", path: "Sources/CLCMS", pkgConfig: "lcms2", providers: [.apt(["liblcms2-dev"])]),
        .systemLibrary(name: "CExif", path: "Sources/CExif", pkgConfig: "libexif", providers: [.apt(["libexif-dev"])]),
        .target(name: "CSupport", path: "Sources/CSupport", cSettings: [.unsafeFlags(["-O2"])]),

        // Pure: pipeline model, YAML loading with locations, planning, stage keys.
        .target(name: "ThreadlineCore",
                dependencies: ["CSupport", .product(name: "Yams", package: "Yams")]),
        // Owns FFmpeg.
        .target(name: "Media", dependencies: ["CFFmpeg", "CHeif", "CLCMS", "CExif", "ThreadlineCore", "CSupport"]),
        // Owns ZeroMQ.
        .target(name: "Transport", dependencies: ["CZeroMQ"]),
        // Owns SQLite.
        .target(name: "Lineage",
                dependencies: ["ThreadlineCore", .product(name: "GRDB", package: "GRDB.swift"),
                               .product(name: "CoreMetrics", package: "swift-metrics")]),
        // Pure scheduling policy: run graphs, ready queues, fair share, retries. No I/O, no clock.
        .target(name: "Scheduler",
                dependencies: [.product(name: "DequeModule", package: "swift-collections"),
                               .product(name: "HeapModule", package: "swift-collections")]),
        // Pure: "For You" suggestions from a dated library (grouping, sizes, titles, blocks). No I/O, no clock.
        .target(name: "Suggestions"),
        // Coordinator, worker runtime, artifact store; the photo-library scanner.
        .target(name: "Engine",
                dependencies: ["ThreadlineCore", "Media", "Transport", "Lineage", "CSupport", "Scheduler", "Suggestions",
                               .product(name: "DequeModule", package: "swift-collections"),
                               .product(name: "Logging", package: "swift-log")]),

        // Owns HTTP: the read-only dashboard, its JSON API and /metrics (Hummingbird, Prometheus).
        .target(name: "Dashboard",
                dependencies: ["Lineage", "Media", "ThreadlineCore",
                               .product(name: "Hummingbird", package: "hummingbird"),
                               .product(name: "Metrics", package: "swift-metrics"),
                               .product(name: "Prometheus", package: "swift-prometheus"),
                               .product(name: "GRDB", package: "GRDB.swift")]),

        .executableTarget(name: "coord",
                          dependencies: ["Engine", "Dashboard", "ThreadlineCore", "Media", "Lineage", "CSupport", "Transport",
                                         .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")]),
        .executableTarget(name: "worker",
                          dependencies: ["Engine", "Transport", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                                         .product(name: "ArgumentParser", package: "swift-argument-parser")]),

        // Fuzz targets (libFuzzer with scripts/fuzz; plain builds replay inputs).
        .executableTarget(name: "fuzz-pipeline", dependencies: ["ThreadlineCore"]),
        .executableTarget(name: "fuzz-wire", dependencies: ["Engine"]),

        // Helpers for tests: generated media, ffprobe, running the real binaries.
        .target(name: "TestSupport", dependencies: ["ThreadlineCore"], path: "Tests/TestSupport"),
        .testTarget(name: "CoreTests", dependencies: ["ThreadlineCore"]),
        .testTarget(name: "SuggestionsTests", dependencies: ["Suggestions"]),
        .testTarget(name: "SchedulerTests", dependencies: ["Scheduler", .product(name: "PropertyBased", package: "swift-property-based")]),
        .testTarget(name: "MediaTests", dependencies: ["Media", "ThreadlineCore", "TestSupport"]),
        .testTarget(name: "EngineTests", dependencies: ["Engine", "ThreadlineCore", "Transport", "Lineage", "Media", "TestSupport", "Dashboard",
                                                        .product(name: "GRDB", package: "GRDB.swift")]),
    ],
    swiftLanguageModes: [.v6]
)
