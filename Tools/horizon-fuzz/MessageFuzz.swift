import HorizonCore
import HorizonProtocol

/// Every session message decoder, through `SessionMessage.decode` (the envelope picks the body
/// decoder). The whole input is one message.
///
/// Checks beyond "returns": the format has exactly one encoding per message, so whatever decodes
/// encodes back to the same bytes and decodes again to an equal value; and a signed message's
/// `signedBytes` is its domain label followed by exactly the bytes that arrived between the
/// envelope and the signature, so what is verified is what was sent.
enum MessageFuzz {
    static func run(_ input: [UInt8]) {
        let message: SessionMessage
        do throws(WireError) {
            message = try SessionMessage.decode(input)
        } catch {
            _ = error.description
            return
        }
        let encoded = message.encoded()
        guard encoded == input else {
            finding("\(message.type) decoded from \(input.hexString) encodes as \(encoded.hexString)")
        }
        guard let again = try? SessionMessage.decode(encoded), again == message else {
            finding("\(message.type) does not decode again to an equal value")
        }
        _ = message.sessionID
        _ = message.type.description
        let signed: (domain: [UInt8], bytes: [UInt8])? =
            switch message {
            case .offer(let offer): (Offer.signatureDomain, offer.signedBytes)
            case .confirm(let confirm): (Confirm.signatureDomain, confirm.signedBytes)
            case .receipt(let receipt): (Receipt.signatureDomain, receipt.signedBytes)
            case .redeem(let redeem): (Redeem.signatureDomain, redeem.signedBytes)
            case .hello, .cancel, .error, .paymentStatusQuery, .proxyRequest, .proxyResponse, .receiptAcknowledgement,
                .proxyError, .offlineTokenRequest, .offlineToken:
                nil
            }
        if let signed {
            let body = Array(input[2..<(input.count - SignatureBytes.byteCount)])
            guard signed.bytes == signed.domain + body else {
                finding("the signed bytes of a \(message.type) differ from what arrived")
            }
        }
        if case .error(let error) = message { _ = error.code.description }
        if case .proxyError(let error) = message { _ = error.code.description }
    }

    static func seeds() -> [[UInt8]] {
        let world = FuzzWorld.shared
        var seeds = world.sampleMessages().map { $0.encoded() }
        // The classic refusals, so the fuzzer starts next to them too.
        seeds.append([1, 0x0B])
        seeds.append([2, 0x01])
        seeds.append([1])
        return seeds
    }
}
