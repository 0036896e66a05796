import Foundation
import Testing
import Transport

/// What the farm's sockets do that libzmq alone does not.
@Suite struct TransportTests {
    /// A dealer connection that reaches a router while its identity is still held by an earlier
    /// connection (a coordinator stalled past its workers' timeout: the worker gave up on the old
    /// connection and dialled again before the router found the old one closed) is never read,
    /// even once the old one is gone; dialling again is. A worker so caught never heard from its
    /// coordinator again (`WorkerRuntime` now redials while the coordinator stays silent).
    @Test func aConnectionTheRouterIgnoredIsReadOnceRedialled() throws {
        let context = MessagingContext()
        let router = try Socket(context, .router)
        let endpoint = try router.bind("tcp://127.0.0.1:*")
        func received(within seconds: Double) throws -> [String] {
            var got: [String] = []
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if let frames = try router.receive(timeoutMs: 50) { got.append(String(decoding: frames.last ?? Data(), as: UTF8.self)) }
            }
            return got
        }
        let old = try Socket(context, .dealer)
        try old.setIdentity("w1")
        try old.connect(endpoint)
        try old.send([Data("old".utf8)], dontWait: false)
        #expect(try received(within: 0.5) == ["old"])
        let new = try Socket(context, .dealer)
        try new.setIdentity("w1")
        try new.connect(endpoint)
        try new.send([Data("hello".utf8)], dontWait: false)
        Thread.sleep(forTimeInterval: 0.3)
        old.close(lingerMs: 0)
        Thread.sleep(forTimeInterval: 0.3)
        try new.send([Data("heartbeat".utf8)], dontWait: false)
        #expect(try received(within: 1).isEmpty, "libzmq read the second connection after all")
        try new.redial(endpoint)
        try new.send([Data("again".utf8)], dontWait: false)
        #expect(try received(within: 2) == ["again"])
        new.close(lingerMs: 0)
        router.close(lingerMs: 0)
    }
}
