import Foundation
import SwiftProtobuf

/// One ZeroMQ frame of the farm protocol: an `Envelope` in protobuf's binary encoding, stamped
/// with this protocol's version first and an end mark last.
public enum Frame {
    /// The protocol version. 1 was JSON envelopes of the engine's own types; 2 is this schema.
    public static let version: UInt32 = 2
    /// The last field of every frame (see `Envelope.end` in Schema/wire.proto).
    public static let endMark: UInt32 = 0x5448_4C4E

    public static func encode(_ message: Threadline_Wire_Envelope.OneOf_Message) -> Data {
        var e = Threadline_Wire_Envelope()
        e.version = version
        e.message = message
        e.end = endMark
        return (try? e.serializedBytes()) ?? Data()
    }

    /// The message in a frame, or why it is refused: not protobuf, another version, cut short, or
    /// a message this version does not know.
    public static func decode(_ data: Data) -> Result<Threadline_Wire_Envelope.OneOf_Message, FrameError> {
        let e: Threadline_Wire_Envelope
        do { e = try Threadline_Wire_Envelope(serializedBytes: data) } catch { return .failure(.malformed("\(error)")) }
        guard e.version == version else { return .failure(.version(e.version)) }
        guard e.end == endMark else { return .failure(.truncated) }
        guard let m = e.message else { return .failure(.unknownMessage) }
        return .success(m)
    }
}

public enum FrameError: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    case version(UInt32)
    case truncated
    case unknownMessage
    /// A render document of another schema, or one that does not decode.
    case document(String)

    public var description: String {
        switch self {
        case .malformed(let why): "not a protocol frame (\(why))"
        case .version(let v): v == 0 ? "no protocol version (a peer older than protocol 2?)" : "protocol version \(v), this peer speaks \(Frame.version)"
        case .truncated: "the frame is cut short (no end mark)"
        case .unknownMessage: "a message this version does not know"
        case .document(let why): "a render document that does not decode: \(why)"
        }
    }
}
