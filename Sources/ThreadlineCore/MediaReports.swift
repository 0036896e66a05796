import Foundation

// What the media engine reports and how it fails, as plain values: the coordinator and the
// protocol carry them without linking the engine (Media, which owns FFmpeg).

/// A failure inside the media engine, attributed to the stage where it happened.
public struct MediaError: Error, Sendable, CustomStringConvertible {
    public enum Class: String, Sendable, Codable {
        /// Worth another attempt: I/O hiccup, network error, out of disk.
        case retryable
        /// Another attempt gives the same result: undecodable input, impossible parameters.
        case permanent
    }
    public var stage: StageKind
    public var errorClass: Class
    /// The file concerned, as the user named it.
    public var file: String
    public var message: String
    /// Writing failed for want of room on the disk: a worker's store gives up what it may before
    /// the retry.
    public var noSpace = false

    public init(_ stage: StageKind, _ errorClass: Class, file: String, _ message: String) {
        self.stage = stage; self.errorClass = errorClass; self.file = file; self.message = message
    }

    /// A write that failed with `error`, marked `noSpace` when the disk was full.
    public init(_ stage: StageKind, _ errorClass: Class, file: String, _ message: String, writing error: Error) {
        self.init(stage, errorClass, file: file, message)
        noSpace = FileChecks.isNoSpace(error)
    }

    public var description: String { "\(stage.rawValue) failed on \(file): \(message)" }

    /// The message of the error an attempt ends with when it was stopped (its run cancelled, its
    /// time limit passed, its coordinator stopping): not a failure of its own.
    public static let cancelledMessage = "cancelled"

    /// The error of an attempt stopped on `file` in `stage`.
    public static func cancelled(_ stage: StageKind, file: String) -> MediaError { MediaError(stage, .retryable, file: file, cancelledMessage) }
}

/// How long each stage of one item's streamed pipeline took.
public struct SegmentReport: Sendable, Hashable, Codable {
    public var decodeSeconds = 0.0
    public var transformSeconds = 0.0
    public var encodeSeconds = 0.0
    public var framesDecoded = 0
    public var framesOut = 0
    public var samplesOut = 0
    public init() {}
}

/// One segment as concat takes it: its file and its exact share of the timeline.
public struct ConcatInput: Sendable, Hashable, Codable {
    public var path: String
    public var frameCount: Int
    public var sampleCount: Int
    public var label: String
    /// Where the part starts in its segment (a key frame), and its first audio sample there.
    public var firstFrame: Int
    public var firstSample: Int
    public init(path: String, frameCount: Int, sampleCount: Int, label: String, firstFrame: Int = 0, firstSample: Int = 0) {
        self.path = path; self.frameCount = frameCount; self.sampleCount = sampleCount; self.label = label
        self.firstFrame = firstFrame; self.firstSample = firstSample
    }
}

public struct ConcatReport: Sendable, Hashable, Codable {
    public var seconds = 0.0
    public var frames = 0
    public var samples = 0
    /// The movie's audio is AAC-encoded in chunks; those whose sound an earlier concat on this
    /// worker already encoded are taken from its audio-chunk cache.
    public var audioChunks = 0
    public var audioChunksReused = 0
    public init() {}
}
