import Foundation
import ThreadlineCore
import Media
import CSupport

/// Runs tasks with the media engine against a shared artifact store.
public struct MediaTaskRunner: TaskRunner {
    public let store: ArtifactStore
    public let fetchLimits: FetchLimits
    /// Whether a task may name a file on this host outside the store (the embedded default's own
    /// workers: the user's files, for the user). A farm's workers read only what the coordinator
    /// sends them, so a submission cannot make them read their own host's files.
    public let localFiles: Bool
    public init(store: ArtifactStore, fetchLimits: FetchLimits = .init(), localFiles: Bool = true) {
        self.store = store; self.fetchLimits = fetchLimits; self.localFiles = localFiles
    }

    /// A cache hit only counts when the stored file still hashes to its address. A reused
    /// source's facts are in lineage already; the coordinator attaches them.
    public func check(_ assignment: Assignment) -> TaskResult {
        // A fetched source counts when present; it is verified by hash where a render reads it.
        // Everything else is verified by hash here.
        let intact: (ArtifactRef) -> Bool = { if case .fetch = assignment.task { return store.isPresent($0) }; return store.verify($0) }
        guard let reuse = assignment.reuse, intact(reuse) else { return .miss(assignment) }
        var result = TaskResult.miss(assignment)
        result.artifact = reuse
        result.cached = true
        if case .segment = assignment.task { result.segment = SegmentReport() }
        result.finishedAt = Date().timeIntervalSince1970
        return result
    }

    public func run(_ assignment: Assignment, isCancelled: @Sendable () -> Bool) -> TaskResult {
        let task = assignment.task
        let started = Date().timeIntervalSince1970
        let cpu0 = tl_cpu_seconds_self()
        var result = TaskResult(lease: assignment.lease, error: nil, artifact: nil, facts: nil, segment: nil,
                                startedAt: started, finishedAt: started, cpuSeconds: 0, maxRSS: 0)
        do {
            switch task {
            case .fetch(let uri, let name):
                let ref: ArtifactRef
                if uri.hasPrefix("/") {
                    let inStore = URL(fileURLWithPath: uri).standardizedFileURL.path
                        .hasPrefix(URL(fileURLWithPath: store.root).standardizedFileURL.path + "/")
                    guard localFiles || inStore else {
                        throw MediaError(.fetch, .permanent, file: name,
                                         "this worker reads only files the coordinator sends it, not \(uri) on its own host (start it with --local-files to allow that)")
                    }
                    guard FileManager.default.isReadableFile(atPath: uri) else {
                        throw MediaError(.fetch, .permanent, file: name, "file not found or not readable: \(uri)")
                    }
                    // A stopped fetch of a large file gives its slot back within a MiB hashed or 64 MiB copied.
                    do { ref = try store.ingest(localFile: uri, isCancelled: isCancelled) } catch is CancellationError {
                        throw MediaError.cancelled(.fetch, file: name)
                    }
                } else {
                    let tmp = store.temporaryPath()
                    do { _ = try Fetch.copy(from: uri, to: tmp, limits: fetchLimits, isCancelled: isCancelled) } catch {
                        try? FileManager.default.removeItem(atPath: tmp); throw error
                    }
                    ref = try store.adopt(tmp)
                }
                result.artifact = ref
                result.facts = try Probe.facts(path: ref.path, name: name, stage: .fetch)
            case .segment(let spec):
                if let source = assignment.source, !(try store.ensureIntact(source, origin: assignment.origin)) {
                    throw MediaError(.decode, .permanent, file: spec.sourceName,
                                     "the stored copy of the source is damaged and its original no longer matches it; submit again to fetch it anew")
                }
                let tmp = store.temporaryPath(suffix: ".mov")
                do {
                    result.segment = try SegmentRenderer.render(spec, to: tmp, isCancelled: isCancelled)
                    result.artifact = try store.adopt(tmp)
                } catch {
                    try? FileManager.default.removeItem(atPath: tmp); throw error
                }
            case .transition(let spec, let from, let to, _):
                let tmp = store.temporaryPath(suffix: ".mov")
                do {
                    result.segment = try TransitionRenderer.render(spec, from: from, to: to, to: tmp, isCancelled: isCancelled)
                    result.artifact = try store.adopt(tmp)
                } catch {
                    try? FileManager.default.removeItem(atPath: tmp); throw error
                }
            case .concat(let inputs, let profile):
                let tmp = store.temporaryPath(suffix: ".mp4")
                do {
                    // Encoded audio chunks beside the store's artifacts: an edit to a later item
                    // re-encodes the movie's audio from that item on, not from the start.
                    _ = try Concat.run(inputs, profile: profile, to: tmp, audioCache: store.root + "/" + StoreFiles.audioChunks, isCancelled: isCancelled)
                    result.artifact = try store.adopt(tmp)
                } catch {
                    try? FileManager.default.removeItem(atPath: tmp); throw error
                }
            }
        } catch let e as MediaError {
            result.error = WireError(e)
        } catch {
            let stage: StageKind
            switch task { case .fetch: stage = .fetch; case .segment: stage = .encode; case .transition: stage = .transition; case .concat: stage = .concat }
            result.error = WireError(stage: stage, errorClass: .retryable, file: task.label, message: "\(error)")
            result.error?.noSpace = (error as? ArtifactStore.PublishError)?.noSpace ?? FileChecks.isNoSpace(error)
        }
        result.finishedAt = Date().timeIntervalSince1970
        result.cpuSeconds = tl_cpu_seconds_self() - cpu0
        result.maxRSS = tl_peak_rss_self()
        return result
    }
}
