// Fuzz target for the wire-message decoder (what the coordinator and workers do with every
// frame they receive): any bytes must decode to an Envelope or to nil, and whatever decodes must
// encode again and decode to the same message kind.
//   scripts/fuzz wire 1000000
import Foundation
import Farm

func fuzzOne(_ data: Data) {
    guard let e = Envelope.decode(data) else { return }
    let again = e.encoded()
    guard let back = Envelope.decode(again) else { fatalError("a decoded message does not survive re-encoding") }
    guard String(describing: back.message).prefix(12) == String(describing: e.message).prefix(12) else {
        fatalError("re-encoding changed the message kind")
    }
}

#if FUZZING
// SwiftPM links an executable's entry point as `<module>_main`; here it hands over to libFuzzer's driver.
@_silgen_name("LLVMFuzzerRunDriver")
func runDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
               _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

@_cdecl("fuzz_wire_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var args = argv
    return runDriver(&count, &args) { data, size in
        fuzzOne(data.map { Data(bytes: $0, count: size) } ?? Data())
        return 0
    }
}
#else
/// Without libFuzzer: `--write-seeds DIR` writes one encoded message of each kind (the fuzzer's
/// starting corpus, always in step with the schema); otherwise replays the files named.
@main struct Replay {
    static func main() throws {
        let args = Array(CommandLine.arguments.dropFirst())
        if args.first == "--write-seeds", args.count == 2 {
            try FileManager.default.createDirectory(atPath: args[1], withIntermediateDirectories: true)
            for (k, m) in WireMessage.examples.enumerated() {
                try Envelope(m).encoded().write(to: URL(fileURLWithPath: "\(args[1])/seed-\(k).bin"))
            }
            return
        }
        for path in args { fuzzOne(try Data(contentsOf: URL(fileURLWithPath: path))) }
        print("replayed \(args.count) inputs")
    }

}
#endif
